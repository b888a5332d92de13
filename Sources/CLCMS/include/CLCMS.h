// CLCMS: Little CMS 2. Its pixel formats (TYPE_RGBA_8 and so on) are built by
// function-like macros, which Swift cannot import; these functions return them.
#ifndef CLCMS_H
#define CLCMS_H

#include <lcms2.h>

cmsUInt32Number clcms_format_rgba8(void);
cmsUInt32Number clcms_format_rgb8(void);
cmsUInt32Number clcms_format_gray8(void);
/// CMYK, 8 bits a channel; `inverted` is Adobe's 255-minus-ink storage (TYPE_CMYK_8_REV).
cmsUInt32Number clcms_format_cmyk8(int inverted);

#endif

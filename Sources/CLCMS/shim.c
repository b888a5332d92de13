#include "CLCMS.h"

cmsUInt32Number clcms_format_rgba8(void) { return TYPE_RGBA_8; }
cmsUInt32Number clcms_format_rgb8(void) { return TYPE_RGB_8; }
cmsUInt32Number clcms_format_gray8(void) { return TYPE_GRAY_8; }
cmsUInt32Number clcms_format_cmyk8(int inverted) { return inverted ? TYPE_CMYK_8_REV : TYPE_CMYK_8; }

#ifndef CFREETYPE_H
#define CFREETYPE_H

#include <stdint.h>

/// A TrueType or OpenType font at one pixel size, through FreeType opened at run time
/// (libfreetype.so.6): the process maps FreeType only once a label is drawn.
typedef struct il_font il_font;

/// One rendered glyph: 8-bit coverage, `rows` rows of `width` pixels, `pitch` bytes apart.
typedef struct {
    int width;
    int rows;
    int pitch;
    /// From the pen position to the bitmap's left edge, and up to its top row.
    int left;
    int top;
    /// Pixels the pen moves after the glyph.
    int advance;
    const unsigned char *buffer;
} il_glyph;

/// Opens FreeType (libfreetype.so.6) on first use; 0 with the reason in `*error` when it
/// cannot be. Defined in lazy.c.
int cfreetype_load_library(const char **error);

/// The font in the file at `path`, `pixels` high; NULL when FreeType or the file cannot be loaded.
il_font *il_font_open(const char *path, int pixels);

/// Renders `codepoint` (the font's missing-glyph box when it has none); 0 on success.
/// The bitmap stays valid until the next call with the same font.
int il_font_render(il_font *font, uint32_t codepoint, il_glyph *glyph);

/// The line's ascent and height in pixels.
int il_font_ascender(const il_font *font);
int il_font_line_height(const il_font *font);

void il_font_close(il_font *font);

#endif

#include "CFreeType.h"

#include <stdlib.h>

#include <ft2build.h>
#include FT_FREETYPE_H

// FreeType is called by its own names: lazy.c (written by scripts/generate-lazy-libraries.py)
// defines each, and opens libfreetype.so.6 on first use.

struct il_font {
    FT_Library library;
    FT_Face face;
};

il_font *il_font_open(const char *path, int pixels) {
    if (!cfreetype_load_library(NULL) || pixels < 1) return NULL;
    il_font *font = calloc(1, sizeof *font);
    if (!font) return NULL;
    if (FT_Init_FreeType(&font->library)) {
        free(font);
        return NULL;
    }
    if (FT_New_Face(font->library, path, 0, &font->face) || FT_Set_Pixel_Sizes(font->face, 0, (FT_UInt)pixels)) {
        if (font->face) FT_Done_Face(font->face);
        FT_Done_FreeType(font->library);
        free(font);
        return NULL;
    }
    return font;
}

int il_font_render(il_font *font, uint32_t codepoint, il_glyph *glyph) {
    if (FT_Load_Char(font->face, codepoint, FT_LOAD_RENDER | FT_LOAD_TARGET_LIGHT)) return -1;
    FT_GlyphSlot slot = font->face->glyph;
    if (slot->bitmap.pixel_mode != FT_PIXEL_MODE_GRAY) return -1;
    glyph->width = (int)slot->bitmap.width;
    glyph->rows = (int)slot->bitmap.rows;
    glyph->pitch = slot->bitmap.pitch;
    glyph->left = slot->bitmap_left;
    glyph->top = slot->bitmap_top;
    glyph->advance = (int)((slot->advance.x + 32) >> 6);
    glyph->buffer = slot->bitmap.buffer;
    return 0;
}

int il_font_ascender(const il_font *font) { return (int)((font->face->size->metrics.ascender + 32) >> 6); }

int il_font_line_height(const il_font *font) { return (int)((font->face->size->metrics.height + 32) >> 6); }

void il_font_close(il_font *font) {
    if (!font) return;
    FT_Done_Face(font->face);
    FT_Done_FreeType(font->library);
    free(font);
}

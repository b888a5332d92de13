#include "CFreeType.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include <ft2build.h>
#include FT_FREETYPE_H

// FreeType's functions, looked up once in libfreetype.so.6.
static FT_Error (*init_library)(FT_Library *);
static FT_Error (*done_library)(FT_Library);
static FT_Error (*new_face)(FT_Library, const char *, FT_Long, FT_Face *);
static FT_Error (*done_face)(FT_Face);
static FT_Error (*set_pixel_sizes)(FT_Face, FT_UInt, FT_UInt);
static FT_Error (*load_char)(FT_Face, FT_ULong, FT_Int32);
static int loaded;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *library = dlopen("libfreetype.so.6", RTLD_NOW | RTLD_LOCAL);
    if (!library) return;
    init_library = (FT_Error(*)(FT_Library *))dlsym(library, "FT_Init_FreeType");
    done_library = (FT_Error(*)(FT_Library))dlsym(library, "FT_Done_FreeType");
    new_face = (FT_Error(*)(FT_Library, const char *, FT_Long, FT_Face *))dlsym(library, "FT_New_Face");
    done_face = (FT_Error(*)(FT_Face))dlsym(library, "FT_Done_Face");
    set_pixel_sizes = (FT_Error(*)(FT_Face, FT_UInt, FT_UInt))dlsym(library, "FT_Set_Pixel_Sizes");
    load_char = (FT_Error(*)(FT_Face, FT_ULong, FT_Int32))dlsym(library, "FT_Load_Char");
    loaded = init_library && done_library && new_face && done_face && set_pixel_sizes && load_char;
}

struct il_font {
    FT_Library library;
    FT_Face face;
};

il_font *il_font_open(const char *path, int pixels) {
    pthread_once(&once, load);
    if (!loaded || pixels < 1) return NULL;
    il_font *font = calloc(1, sizeof *font);
    if (!font) return NULL;
    if (init_library(&font->library)) {
        free(font);
        return NULL;
    }
    if (new_face(font->library, path, 0, &font->face) || set_pixel_sizes(font->face, 0, (FT_UInt)pixels)) {
        if (font->face) done_face(font->face);
        done_library(font->library);
        free(font);
        return NULL;
    }
    return font;
}

int il_font_render(il_font *font, uint32_t codepoint, il_glyph *glyph) {
    if (load_char(font->face, codepoint, FT_LOAD_RENDER | FT_LOAD_TARGET_LIGHT)) return -1;
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
    done_face(font->face);
    done_library(font->library);
    free(font);
}

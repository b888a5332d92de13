// The functions of librsvg, GLib and cairo that rendering calls, declared as librsvg 2.52
// and cairo 1.16 declare them (Debian's librsvg2-2 comes without headers; only what is
// called is declared, its types opaque). lazy.c defines them, calling the library's own
// through dlsym, once csvg_load_library has opened librsvg-2.so.2.
#ifndef CSVG_LIBRSVG_H
#define CSVG_LIBRSVG_H

#include <stddef.h>
#include <stdint.h>

typedef struct _RsvgHandle RsvgHandle;
typedef struct _cairo cairo_t;
typedef struct _cairo_surface cairo_surface_t;
typedef struct {
    double x, y, width, height;
} RsvgRectangle;
typedef struct {
    uint32_t domain;
    int code;
    char *message;
} GError;

RsvgHandle *rsvg_handle_new_from_data(const uint8_t *data, size_t data_len, GError **error);
int rsvg_handle_render_document(RsvgHandle *handle, cairo_t *cr, const RsvgRectangle *viewport, GError **error);
void g_object_unref(void *object);
void g_error_free(GError *error);
cairo_surface_t *cairo_image_surface_create_for_data(unsigned char *data, int format, int width, int height,
                                                     int stride);
int cairo_surface_status(cairo_surface_t *surface);
void cairo_surface_flush(cairo_surface_t *surface);
void cairo_surface_destroy(cairo_surface_t *surface);
cairo_t *cairo_create(cairo_surface_t *target);
int cairo_status(cairo_t *cr);
void cairo_destroy(cairo_t *cr);
const char *cairo_status_to_string(int status);

#endif

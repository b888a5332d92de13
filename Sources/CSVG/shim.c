#include "CSVG.h"

#include <stdio.h>
#include <string.h>

#include "librsvg.h"

// librsvg and cairo are called by their own names: lazy.c (written by
// scripts/generate-lazy-libraries.py) defines each, and opens the library on first use.

static int fail(char *message, size_t message_size, const char *text) {
    if (message_size > 0) snprintf(message, message_size, "%s", text ? text : "unknown error");
    return -1;
}

int csvg_render(const uint8_t *data, size_t size, int width, int height, uint8_t *pixels, char *message,
                size_t message_size) {
    const char *missing = NULL;
    if (!csvg_load_library(&missing)) return fail(message, message_size, missing);
    if (width < 1 || height < 1) return fail(message, message_size, "an empty size");
    memset(pixels, 0, (size_t)width * (size_t)height * 4);
    GError *error = NULL;
    RsvgHandle *handle = rsvg_handle_new_from_data(data, size, &error);
    if (!handle) {
        int result = fail(message, message_size, error ? error->message : "librsvg cannot read the document");
        if (error) g_error_free(error);
        return result;
    }
    // CAIRO_FORMAT_ARGB32 is 0; its stride for any width is width * 4.
    cairo_surface_t *surface = cairo_image_surface_create_for_data(pixels, 0, width, height, width * 4);
    if (cairo_surface_status(surface) != 0) {
        int result = fail(message, message_size, cairo_status_to_string(cairo_surface_status(surface)));
        cairo_surface_destroy(surface);
        g_object_unref(handle);
        return result;
    }
    cairo_t *cairo = cairo_create(surface);
    RsvgRectangle viewport = {0, 0, (double)width, (double)height};
    int rendered = rsvg_handle_render_document(handle, cairo, &viewport, &error);
    int result = 0;
    if (!rendered) {
        result = fail(message, message_size, error ? error->message : "librsvg cannot render the document");
        if (error) g_error_free(error);
    } else if (cairo_status(cairo) != 0) {
        result = fail(message, message_size, cairo_status_to_string(cairo_status(cairo)));
    }
    cairo_destroy(cairo);
    cairo_surface_flush(surface);
    cairo_surface_destroy(surface);
    g_object_unref(handle);
    return result;
}

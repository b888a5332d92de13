#include "CSVG.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

// The few types rendering touches, as librsvg and cairo define them.
typedef struct { double x, y, width, height; } csvg_rectangle;
typedef struct { uint32_t domain; int code; char *message; } csvg_gerror;

static void *(*new_from_data)(const uint8_t *, size_t, csvg_gerror **);
static int (*render_document)(void *, void *, const csvg_rectangle *, csvg_gerror **);
static void (*object_unref)(void *);
static void (*error_free)(csvg_gerror *);
static void *(*surface_create_for_data)(uint8_t *, int, int, int, int);
static int (*surface_status)(void *);
static void (*surface_flush)(void *);
static void (*surface_destroy)(void *);
static void *(*cairo_create)(void *);
static int (*cairo_status)(void *);
static void (*cairo_destroy)(void *);
static const char *(*status_to_string)(int);
static int loaded;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *library = dlopen("librsvg-2.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!library) return;
    // librsvg's dependencies (GLib, GObject, cairo) are found through its handle.
    new_from_data = (void *(*)(const uint8_t *, size_t, csvg_gerror **))dlsym(library, "rsvg_handle_new_from_data");
    render_document = (int (*)(void *, void *, const csvg_rectangle *, csvg_gerror **))dlsym(
        library, "rsvg_handle_render_document");
    object_unref = (void (*)(void *))dlsym(library, "g_object_unref");
    error_free = (void (*)(csvg_gerror *))dlsym(library, "g_error_free");
    surface_create_for_data = (void *(*)(uint8_t *, int, int, int, int))dlsym(
        library, "cairo_image_surface_create_for_data");
    surface_status = (int (*)(void *))dlsym(library, "cairo_surface_status");
    surface_flush = (void (*)(void *))dlsym(library, "cairo_surface_flush");
    surface_destroy = (void (*)(void *))dlsym(library, "cairo_surface_destroy");
    cairo_create = (void *(*)(void *))dlsym(library, "cairo_create");
    cairo_status = (int (*)(void *))dlsym(library, "cairo_status");
    cairo_destroy = (void (*)(void *))dlsym(library, "cairo_destroy");
    status_to_string = (const char *(*)(int))dlsym(library, "cairo_status_to_string");
    loaded = new_from_data && render_document && object_unref && error_free && surface_create_for_data &&
             surface_status && surface_flush && surface_destroy && cairo_create && cairo_status && cairo_destroy &&
             status_to_string;
}

int csvg_available(void) {
    pthread_once(&once, load);
    return loaded;
}

static int fail(char *message, size_t message_size, const char *text) {
    if (message_size > 0) snprintf(message, message_size, "%s", text ? text : "unknown error");
    return -1;
}

int csvg_render(const uint8_t *data, size_t size, int width, int height, uint8_t *pixels, char *message,
                size_t message_size) {
    if (!csvg_available()) return fail(message, message_size, "librsvg is not installed (librsvg-2.so.2)");
    if (width < 1 || height < 1) return fail(message, message_size, "an empty size");
    memset(pixels, 0, (size_t)width * (size_t)height * 4);
    csvg_gerror *error = NULL;
    void *handle = new_from_data(data, size, &error);
    if (!handle) {
        int result = fail(message, message_size, error ? error->message : "librsvg cannot read the document");
        if (error) error_free(error);
        return result;
    }
    // CAIRO_FORMAT_ARGB32 is 0; its stride for any width is width * 4.
    void *surface = surface_create_for_data(pixels, 0, width, height, width * 4);
    if (surface_status(surface) != 0) {
        int result = fail(message, message_size, status_to_string(surface_status(surface)));
        surface_destroy(surface);
        object_unref(handle);
        return result;
    }
    void *cairo = cairo_create(surface);
    csvg_rectangle viewport = {0, 0, (double)width, (double)height};
    int rendered = render_document(handle, cairo, &viewport, &error);
    int result = 0;
    if (!rendered) {
        result = fail(message, message_size, error ? error->message : "librsvg cannot render the document");
        if (error) error_free(error);
    } else if (cairo_status(cairo) != 0) {
        result = fail(message, message_size, status_to_string(cairo_status(cairo)));
    }
    cairo_destroy(cairo);
    surface_flush(surface);
    surface_destroy(surface);
    object_unref(handle);
    return result;
}

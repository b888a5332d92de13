#include "CTIFF.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void keep_message(ctiff_handle *handle, int is_error, const char *module, const char *format, va_list args) {
    if (is_error) handle->errors++;
    // The first error wins; a warning is kept only until an error arrives.
    if (handle->message[0] != 0 && !(is_error && handle->errors == 1)) return;
    char text[200];
    vsnprintf(text, sizeof text, format, args);
    if (module && module[0]) snprintf(handle->message, sizeof handle->message, "%s: %s", module, text);
    else snprintf(handle->message, sizeof handle->message, "%s", text);
}

static int on_error(TIFF *tiff, void *user_data, const char *module, const char *format, va_list args) {
    (void)tiff;
    keep_message((ctiff_handle *)user_data, 1, module, format, args);
    return 1;  // handled: libtiff's default handler (which prints) does not run
}

static int on_warning(TIFF *tiff, void *user_data, const char *module, const char *format, va_list args) {
    (void)tiff;
    keep_message((ctiff_handle *)user_data, 0, module, format, args);
    return 1;
}

static tmsize_t proc_read(thandle_t client, void *buffer, tmsize_t count) {
    ctiff_handle *handle = (ctiff_handle *)client;
    if (count <= 0) return 0;
    size_t got = 0;
    if (handle->position < handle->size) {
        uint64_t available = handle->size - handle->position;
        size_t wanted = (uint64_t)count < available ? (size_t)count : (size_t)available;
        if (handle->memory) {
            memcpy(buffer, handle->memory + handle->position, wanted);
            got = wanted;
        } else {
            got = handle->read_at(handle->context, handle->position, (uint8_t *)buffer, wanted);
        }
    }
    handle->position += got;
    if (got < (size_t)count) handle->reached_end_of_data = 1;
    return (tmsize_t)got;
}

static tmsize_t proc_write(thandle_t client, void *buffer, tmsize_t count) {
    (void)client; (void)buffer; (void)count;
    return 0;  // read only
}

static toff_t proc_seek(thandle_t client, toff_t offset, int whence) {
    ctiff_handle *handle = (ctiff_handle *)client;
    uint64_t base = whence == SEEK_CUR ? handle->position : whence == SEEK_END ? handle->size : 0;
    handle->position = base + offset;
    return handle->position;
}

static int proc_close(thandle_t client) { (void)client; return 0; }

static toff_t proc_size(thandle_t client) { return ((ctiff_handle *)client)->size; }

static int proc_map(thandle_t client, void **base, toff_t *size) {
    // Never mapped, even when the input is in memory: every read then goes through
    // proc_read, which notices reads past the end (how a cut file is told from a corrupt one).
    (void)client; (void)base; (void)size;
    return 0;
}

static void proc_unmap(thandle_t client, void *base, toff_t size) {
    (void)client; (void)base; (void)size;
}

static pthread_once_t silence_once = PTHREAD_ONCE_INIT;

static void silence_global_handlers(void) {
    // A few libtiff code paths still report through the process-wide handlers,
    // whose defaults print to stderr; the library never prints.
    TIFFSetErrorHandler(NULL);
    TIFFSetWarningHandler(NULL);
}

int ctiff_open(ctiff_handle *handle, uint64_t max_single_allocation) {
    pthread_once(&silence_once, silence_global_handlers);
    TIFFOpenOptions *options = TIFFOpenOptionsAlloc();
    if (!options) {
        snprintf(handle->message, sizeof handle->message, "libtiff could not allocate its options");
        return -1;
    }
    TIFFOpenOptionsSetErrorHandlerExtR(options, on_error, handle);
    TIFFOpenOptionsSetWarningHandlerExtR(options, on_warning, handle);
    if (max_single_allocation > 0) TIFFOpenOptionsSetMaxSingleMemAlloc(options, (tmsize_t)max_single_allocation);
    handle->tiff = TIFFClientOpenExt("input", "r", (thandle_t)handle,
                                     proc_read, proc_write, proc_seek, proc_close,
                                     proc_size, proc_map, proc_unmap, options);
    TIFFOpenOptionsFree(options);
    if (!handle->tiff) {
        if (handle->message[0] == 0) snprintf(handle->message, sizeof handle->message, "not a readable TIFF");
        return -1;
    }
    return 0;
}

void ctiff_close(ctiff_handle *handle) {
    if (handle->tiff) TIFFClose(handle->tiff);
    handle->tiff = NULL;
}

int ctiff_get_uint16(TIFF *tiff, uint32_t tag, uint16_t *value) { return TIFFGetField(tiff, tag, value); }
int ctiff_get_uint32(TIFF *tiff, uint32_t tag, uint32_t *value) { return TIFFGetField(tiff, tag, value); }
int ctiff_get_uint16_defaulted(TIFF *tiff, uint32_t tag, uint16_t *value) { return TIFFGetFieldDefaulted(tiff, tag, value); }
int ctiff_get_uint32_defaulted(TIFF *tiff, uint32_t tag, uint32_t *value) { return TIFFGetFieldDefaulted(tiff, tag, value); }

int ctiff_get_extra_samples(TIFF *tiff, uint16_t *count, const uint16_t **types) {
    uint16_t *values = NULL;
    int found = TIFFGetFieldDefaulted(tiff, TIFFTAG_EXTRASAMPLES, count, &values);
    *types = values;
    return found;
}

int ctiff_get_colormap(TIFF *tiff, const uint16_t **red, const uint16_t **green, const uint16_t **blue) {
    uint16_t *r = NULL, *g = NULL, *b = NULL;
    int found = TIFFGetField(tiff, TIFFTAG_COLORMAP, &r, &g, &b);
    *red = r; *green = g; *blue = b;
    return found;
}

int ctiff_get_icc_profile(TIFF *tiff, const uint8_t **data, uint32_t *length) {
    void *bytes = NULL;
    uint32_t count = 0;
    int found = TIFFGetField(tiff, TIFFTAG_ICCPROFILE, &count, &bytes);
    *data = (const uint8_t *)bytes;
    *length = count;
    return found;
}

int ctiff_set_jpeg_color_mode_rgb(TIFF *tiff) {
    return TIFFSetField(tiff, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
}

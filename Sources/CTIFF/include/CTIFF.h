// CTIFF: libtiff with its messages kept per handle (never printed) and non-variadic
// wrappers for TIFFGetField/TIFFSetField, which Swift cannot call.
#ifndef CTIFF_H
#define CTIFF_H

#include <stddef.h>
#include <stdint.h>
#include <tiffio.h>

/// Opens libtiff (once per process; `IMAGELOADER_TIFF_LIBRARY` may name another file;
/// lazy.c, written by scripts/generate-lazy-libraries.py). Returns 1 when every function
/// this target calls was found, else 0 with `*error` saying why. No other function of
/// this target may be called before it returned 1.
int ctiff_load_library(const char **error);

/// Copies up to `count` bytes at `offset` into `buffer`; returns how many it copied.
typedef size_t (*ctiff_read_at_fn)(void *context, uint64_t offset, uint8_t *buffer, size_t count);

typedef struct ctiff_handle {
    TIFF *tiff;
    /// The input: either `memory` (the whole file) or `read_at`.
    const uint8_t *memory;
    uint64_t size;
    ctiff_read_at_fn read_at;
    void *context;
    uint64_t position;
    /// Set when a read asked for bytes past the end of the data.
    int reached_end_of_data;
    int errors;
    /// The first error, or when there was none the first warning.
    char message[256];
} ctiff_handle;

/// Opens the TIFF described by `handle` (set `memory` and `size`, or `read_at`,
/// `context` and `size`, first). `max_single_allocation` caps any one buffer libtiff
/// allocates for itself (0: libtiff's default). Returns 0, or -1 with `message` set.
int ctiff_open(ctiff_handle *handle, uint64_t max_single_allocation);
void ctiff_close(ctiff_handle *handle);

/// TIFFGetField for tags whose value is one number. Returns 1 when the tag is present.
int ctiff_get_uint16(TIFF *tiff, uint32_t tag, uint16_t *value);
int ctiff_get_uint32(TIFF *tiff, uint32_t tag, uint32_t *value);
/// The same through TIFFGetFieldDefaulted (the TIFF default when the tag is absent).
int ctiff_get_uint16_defaulted(TIFF *tiff, uint32_t tag, uint16_t *value);
int ctiff_get_uint32_defaulted(TIFF *tiff, uint32_t tag, uint32_t *value);
/// ExtraSamples: the count and a pointer owned by libtiff.
int ctiff_get_extra_samples(TIFF *tiff, uint16_t *count, const uint16_t **types);
/// ColorMap: three arrays of (1 << bits per sample) entries owned by libtiff.
int ctiff_get_colormap(TIFF *tiff, const uint16_t **red, const uint16_t **green, const uint16_t **blue);
/// ICCProfile: the bytes (owned by libtiff) and their count.
int ctiff_get_icc_profile(TIFF *tiff, const uint8_t **data, uint32_t *length);
/// Asks the JPEG codec for RGB instead of YCbCr (TIFFTAG_JPEGCOLORMODE).
int ctiff_set_jpeg_color_mode_rgb(TIFF *tiff);

#endif

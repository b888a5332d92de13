// CPNG: libpng behind setjmp. libpng reports errors by longjmp, which Swift cannot
// catch, so every call that can fail goes through a function here that sets the
// jump buffer and returns 0 on success or -1 with `message` filled in.
#ifndef CPNG_H
#define CPNG_H

#include <png.h>
#include <stddef.h>
#include <stdint.h>

/// Copies up to `count` bytes into `buffer` and returns how many it copied.
/// Fewer than `count` means the data ended (or could not be read).
typedef size_t (*cpng_read_fn)(void *context, uint8_t *buffer, size_t count);

/// Consumes `count` bytes; returns 0 on success, non-zero when they could not be written.
typedef int (*cpng_write_fn)(void *context, const uint8_t *buffer, size_t count);

typedef struct cpng_reader {
    png_structp png;
    png_infop info;
    png_infop end_info;
    cpng_read_fn read;
    void *context;
    /// Set when `read` returned fewer bytes than libpng asked for.
    int reached_end_of_data;
    /// The largest single allocation libpng may make; larger requests get NULL, which
    /// libpng reports as an error or skips the chunk (a 500-byte file can declare a
    /// 2 GB eXIf chunk, which libpng would otherwise allocate before reading it).
    size_t max_allocation;
    /// The largest request seen, and how many were refused (for the tests).
    size_t largest_request;
    unsigned refused_allocations;
    /// The last error (or, when there was none, the last warning) libpng reported.
    char message[200];
} cpng_reader;

/// Creates the libpng structures. Returns 0, or -1 when libpng could not allocate them.
int cpng_reader_init(cpng_reader *reader, cpng_read_fn read, void *context, size_t max_allocation);
void cpng_reader_destroy(cpng_reader *reader);

/// Reads the signature and every chunk before the first IDAT.
int cpng_read_info(cpng_reader *reader);

/// Asks libpng for 8-bit RGBA rows whatever the source holds (palette and tRNS
/// expanded, gray to RGB, 16-bit scaled with rounding, opaque filler added) and
/// returns the number of interlace passes in `passes` (1, or 7 for Adam7).
int cpng_set_rgba8_output(cpng_reader *reader, int *passes);

/// Reads the next row of the current pass into `row` (width * 4 bytes). With
/// interlacing, libpng merges each pass into what `row` already holds.
int cpng_read_row(cpng_reader *reader, uint8_t *row);

/// Reads the chunks after the image data (an eXIf may live there) up to IEND.
int cpng_read_end(cpng_reader *reader);

/// Writes a whole 8-bit image as PNG. `pixels` holds `height` rows of `stride`
/// bytes, 4 bytes a pixel (RGBA). When `drop_alpha` is non-zero the fourth byte
/// is left out and the file is RGB. `level` is zlib's 0...9. `icc` may be NULL.
int cpng_write_rgba8(cpng_write_fn write, void *context,
                     const uint8_t *pixels, uint32_t width, uint32_t height, size_t stride,
                     int drop_alpha, int level,
                     const uint8_t *icc, uint32_t icc_length,
                     char *message, size_t message_capacity);

/// Compresses `length` bytes into a zlib stream with zlib's run-length strategy
/// (Z_RLE: matches only at distance 1, Huffman codes for the rest), which suits
/// filtered photographs. Returns the stream's length, or 0 when it does not fit in
/// `capacity` or zlib fails. `deflateInit2` is a macro, hence the shim.
size_t cpng_zlib_compress_rle(const uint8_t *input, size_t length, uint8_t *output, size_t capacity);

#endif

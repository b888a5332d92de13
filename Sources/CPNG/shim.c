#include "CPNG.h"

#include <setjmp.h>
#include <zlib.h>
#include <stdlib.h>
#include <string.h>

static void copy_message(char *destination, size_t capacity, const char *text) {
    if (capacity == 0) return;
    strncpy(destination, text ? text : "unknown error", capacity - 1);
    destination[capacity - 1] = 0;
}

// ---- reading ---------------------------------------------------------------

static void reader_error(png_structp png, png_const_charp text) {
    cpng_reader *reader = (cpng_reader *)png_get_error_ptr(png);
    copy_message(reader->message, sizeof reader->message, text);
    png_longjmp(png, 1);
}

static void reader_warning(png_structp png, png_const_charp text) {
    // Kept, never printed: the library does not write to stderr.
    cpng_reader *reader = (cpng_reader *)png_get_error_ptr(png);
    if (reader->message[0] == 0) copy_message(reader->message, sizeof reader->message, text);
}

static void reader_read(png_structp png, png_bytep data, size_t length) {
    cpng_reader *reader = (cpng_reader *)png_get_io_ptr(png);
    size_t got = reader->read(reader->context, data, length);
    if (got < length) {
        reader->reached_end_of_data = 1;
        png_error(png, "unexpected end of data");
    }
}

static png_voidp reader_malloc(png_structp png, png_alloc_size_t size) {
    cpng_reader *reader = (cpng_reader *)png_get_mem_ptr(png);
    if (size > reader->largest_request) reader->largest_request = size;
    if (size > reader->max_allocation) {
        reader->refused_allocations++;
        return NULL;
    }
    return malloc(size);
}

static void reader_free(png_structp png, png_voidp pointer) {
    (void)png;
    free(pointer);
}

/// The ancillary chunks libpng knows but no answer here uses: five bytes each (the
/// name and a NUL), as png_set_keep_unknown_chunks takes them.
static const png_byte ignored_chunks[] =
    "bKGD\0cHRM\0gAMA\0hIST\0iTXt\0oFFs\0pCAL\0pHYs\0sBIT\0sCAL\0sPLT\0sRGB\0sTER\0tEXt\0tIME\0zTXt";

int cpng_reader_init(cpng_reader *reader, cpng_read_fn read, void *context, size_t max_allocation) {
    memset(reader, 0, sizeof *reader);
    reader->read = read;
    reader->context = context;
    reader->max_allocation = max_allocation;
    reader->png = png_create_read_struct_2(PNG_LIBPNG_VER_STRING, reader, reader_error, reader_warning,
                                           reader, reader_malloc, reader_free);
    if (!reader->png) {
        copy_message(reader->message, sizeof reader->message, "libpng could not allocate its state");
        return -1;
    }
    reader->info = png_create_info_struct(reader->png);
    reader->end_info = png_create_info_struct(reader->png);
    if (!reader->info || !reader->end_info) {
        copy_message(reader->message, sizeof reader->message, "libpng could not allocate its state");
        return -1;
    }
    png_set_read_fn(reader->png, reader, reader_read);
    // Dimensions are checked against the caller's limits in Swift; lift libpng's
    // own 1,000,000-pixel cap so that check, with its clearer error, is the one that fires.
    png_set_user_limits(reader->png, 0x7fffffff, 0x7fffffff);
    // Only the chunks an answer needs are read: the critical ones, tRNS, iCCP and eXIf.
    // Text (tEXt, zTXt, iTXt: a few hundred KB of zTXt inflate to gigabytes), unknown
    // chunks and every other ancillary chunk are skipped as they pass, their CRC checked,
    // nothing decompressed or stored.
    png_set_keep_unknown_chunks(reader->png, PNG_HANDLE_CHUNK_NEVER, NULL, 0);
    png_set_keep_unknown_chunks(reader->png, PNG_HANDLE_CHUNK_NEVER, ignored_chunks,
                                (int)(sizeof ignored_chunks / 5));
    // And should one be read after all: at most 8 MB each once decompressed (an iCCP
    // bomb) and 1,000 of them, whatever this libpng's build defaults are.
    png_set_chunk_malloc_max(reader->png, 8000000);
    png_set_chunk_cache_max(reader->png, 1000);
    return 0;
}

void cpng_reader_destroy(cpng_reader *reader) {
    if (reader->png) png_destroy_read_struct(&reader->png, &reader->info, &reader->end_info);
    reader->png = NULL;
}

int cpng_read_info(cpng_reader *reader) {
    if (setjmp(png_jmpbuf(reader->png))) return -1;
    png_read_info(reader->png, reader->info);
    return 0;
}

int cpng_set_rgba8_output(cpng_reader *reader, int *passes) {
    png_structp png = reader->png;
    png_infop info = reader->info;
    if (setjmp(png_jmpbuf(png))) return -1;
    int color_type = png_get_color_type(png, info);
    int bit_depth = png_get_bit_depth(png, info);
    int has_trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
    if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (has_trns) png_set_tRNS_to_alpha(png);
    if (bit_depth == 16) png_set_scale_16(png);
    if (color_type == PNG_COLOR_TYPE_GRAY || color_type == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    if (!(color_type & PNG_COLOR_MASK_ALPHA) && !has_trns) png_set_filler(png, 0xff, PNG_FILLER_AFTER);
    *passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != (size_t)png_get_image_width(png, info) * 4) {
        png_error(png, "unexpected row layout after transformation");
    }
    return 0;
}

int cpng_read_row(cpng_reader *reader, uint8_t *row) {
    if (setjmp(png_jmpbuf(reader->png))) return -1;
    png_read_row(reader->png, row, NULL);
    return 0;
}

int cpng_read_end(cpng_reader *reader) {
    if (setjmp(png_jmpbuf(reader->png))) return -1;
    png_read_end(reader->png, reader->end_info);
    return 0;
}

// ---- writing ---------------------------------------------------------------

typedef struct writer_state {
    cpng_write_fn write;
    void *context;
    char *message;
    size_t message_capacity;
} writer_state;

static void writer_error(png_structp png, png_const_charp text) {
    writer_state *state = (writer_state *)png_get_error_ptr(png);
    copy_message(state->message, state->message_capacity, text);
    png_longjmp(png, 1);
}

static void writer_warning(png_structp png, png_const_charp text) {
    (void)png;
    (void)text;
}

static void writer_write(png_structp png, png_bytep data, size_t length) {
    writer_state *state = (writer_state *)png_get_io_ptr(png);
    if (state->write(state->context, data, length) != 0) png_error(png, "could not write the output");
}

static void writer_flush(png_structp png) { (void)png; }

static int write_rows(png_structp png, png_infop info, writer_state *state,
                      const uint8_t *pixels, uint32_t width, uint32_t height, size_t stride,
                      int drop_alpha, int level, const uint8_t *icc, uint32_t icc_length) {
    if (setjmp(png_jmpbuf(png))) return -1;
    png_set_write_fn(png, state, writer_write, writer_flush);
    png_set_compression_level(png, level);
    png_set_IHDR(png, info, width, height, 8,
                 drop_alpha ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_RGB_ALPHA,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (icc && icc_length > 0) {
        png_set_iCCP(png, info, "ICC profile", PNG_COMPRESSION_TYPE_BASE, icc, icc_length);
    }
    png_write_info(png, info);
    if (drop_alpha) png_set_filler(png, 0, PNG_FILLER_AFTER);
    for (uint32_t y = 0; y < height; y++) {
        png_write_row(png, (png_const_bytep)(pixels + (size_t)y * stride));
    }
    png_write_end(png, info);
    return 0;
}

int cpng_write_rgba8(cpng_write_fn write, void *context,
                     const uint8_t *pixels, uint32_t width, uint32_t height, size_t stride,
                     int drop_alpha, int level,
                     const uint8_t *icc, uint32_t icc_length,
                     char *message, size_t message_capacity) {
    writer_state state = { write, context, message, message_capacity };
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &state, writer_error, writer_warning);
    if (!png) {
        copy_message(message, message_capacity, "libpng could not allocate its state");
        return -1;
    }
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        copy_message(message, message_capacity, "libpng could not allocate its state");
        return -1;
    }
    int result = write_rows(png, info, &state, pixels, width, height, stride, drop_alpha, level, icc, icc_length);
    png_destroy_write_struct(&png, &info);
    return result;
}

// ---- zlib's run-length strategy ---------------------------------------------

size_t cpng_zlib_compress_rle(const uint8_t *input, size_t length, uint8_t *output, size_t capacity) {
    if (length > UINT32_MAX || capacity > UINT32_MAX) return 0;
    z_stream stream;
    memset(&stream, 0, sizeof stream);
    // Level 6 and the largest window and memory: Z_RLE's speed hardly depends on them.
    if (deflateInit2(&stream, 6, Z_DEFLATED, 15, 9, Z_RLE) != Z_OK) return 0;
    stream.next_in = (Bytef *)input;
    stream.avail_in = (uInt)length;
    stream.next_out = output;
    stream.avail_out = (uInt)capacity;
    int status = deflate(&stream, Z_FINISH);
    size_t written = stream.total_out;
    deflateEnd(&stream);
    return status == Z_STREAM_END ? written : 0;
}

// CJPEG: libjpeg-turbo behind setjmp. libjpeg's default error handler calls exit(),
// so every call that can fail goes through a function here that traps the error
// with setjmp and returns 0 on success or -1 with `message` filled in.
#ifndef CJPEG_H
#define CJPEG_H

// jpeglib.h uses size_t and FILE without including their headers.
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <setjmp.h>
#include <jpeglib.h>

/// Copies up to `capacity` bytes into `buffer` and returns how many; 0 means the data ended.
typedef size_t (*cjpeg_read_fn)(void *context, uint8_t *buffer, size_t capacity);

/// Consumes `count` bytes; returns 0 on success, non-zero when they could not be written.
typedef int (*cjpeg_write_fn)(void *context, const uint8_t *buffer, size_t count);

typedef struct cjpeg_decoder {
    /// First member, so libjpeg's `j_common_ptr` is also a pointer to this struct.
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr error;
    struct jpeg_source_mgr source;
    struct jpeg_progress_mgr progress;
    jmp_buf jump;
    /// Input: either `memory` (the whole file) or `read` filling `buffer`.
    const uint8_t *memory;
    size_t memory_size;
    cjpeg_read_fn read;
    void *context;
    uint8_t *buffer;
    size_t buffer_capacity;
    /// Set when the data ended before the decoder was done with it.
    int reached_end_of_data;
    /// Abort when a progressive file has more scans than this (0: no limit).
    int max_scans;
    int exceeded_max_scans;
    /// Warnings libjpeg raised (corrupt data it could step over).
    unsigned warnings;
    char message[JMSG_LENGTH_MAX];
    /// What the APP1 and APP2 readers kept (every other marker is skipped as it passes):
    /// the first EXIF APP1's data (after its "Exif\0\0"-led header, whole), and the ICC
    /// profile's APP2 chunks by sequence number (1...255; their data after the 14-byte
    /// header). Freed by cjpeg_decoder_destroy.
    uint8_t *exif;
    size_t exif_length;
    uint8_t *icc_chunks[256];
    size_t icc_lengths[256];
    /// The chunk count the first ICC chunk declared; set when chunks disagree (another
    /// count, a sequence number out of range or seen twice): the profile is then unusable.
    int icc_declared_count;
    int icc_inconsistent;
} cjpeg_decoder;

/// Prepares `decoder` to read either `memory` (when non-NULL) or through `read`,
/// which fills `buffer` (`capacity` bytes, owned by the caller). The first EXIF APP1
/// and the ICC profile's APP2 chunks are kept for the caller; libjpeg keeps nothing else
/// (its own list of saved markers grows by walking to its end, so a flood of small
/// markers took time quadratic in their number).
int cjpeg_decoder_init(cjpeg_decoder *decoder,
                       const uint8_t *memory, size_t memory_size,
                       cjpeg_read_fn read, void *context, uint8_t *buffer, size_t capacity);
void cjpeg_decoder_destroy(cjpeg_decoder *decoder);

int cjpeg_read_header(cjpeg_decoder *decoder);
int cjpeg_start_decompress(cjpeg_decoder *decoder);
/// Reads up to `max_rows` rows; `rows_read` says how many arrived.
int cjpeg_read_scanlines(cjpeg_decoder *decoder, uint8_t **rows, uint32_t max_rows, uint32_t *rows_read);

/// How cjpeg_encode_rgba writes.
typedef struct cjpeg_encode_settings {
    int quality;        /// 1...100
    int progressive;    /// non-zero: a progressive file
    int optimize;       /// non-zero: optimised Huffman tables
    int subsampling;    /// chroma: 0 = 4:4:4, 1 = 4:2:2, 2 = 4:2:0
    const uint8_t *icc; /// may be NULL
    unsigned icc_length;
    const uint8_t *exif; /// a TIFF-structured EXIF block, written as APP1 after "Exif\0\0"; may be NULL
    unsigned exif_length; /// at most 65527
    int grayscale;      /// non-zero: one grey component (the luma of the RGBA rows)
} cjpeg_encode_settings;

/// Encodes `height` rows of `stride` bytes, 4 bytes a pixel (RGBA; alpha ignored).
/// On success `*output` (allocated with malloc; free it with cjpeg_free) holds
/// `*output_size` bytes. Returns 0, or -1 with `message` filled in.
int cjpeg_encode_rgba(const uint8_t *pixels, uint32_t width, uint32_t height, size_t stride,
                      const cjpeg_encode_settings *settings,
                      uint8_t **output, unsigned long *output_size,
                      char *message, size_t message_capacity);
void cjpeg_free(void *pointer);

#endif

#include "CJPEG.h"

#include <jerror.h>
#include <stdlib.h>
#include <string.h>

static const JOCTET fake_end_of_image[2] = { 0xFF, JPEG_EOI };

static cjpeg_decoder *decoder_of(j_common_ptr cinfo) {
    // `cinfo` is the decoder's first member.
    return (cjpeg_decoder *)cinfo;
}

static void error_exit(j_common_ptr cinfo) {
    cjpeg_decoder *decoder = decoder_of(cinfo);
    (*cinfo->err->format_message)(cinfo, decoder->message);
    longjmp(decoder->jump, 1);
}

static void emit_message(j_common_ptr cinfo, int level) {
    if (level >= 0) return;  // trace messages
    cjpeg_decoder *decoder = decoder_of(cinfo);
    if (cinfo->err->msg_code == JWRN_JPEG_EOF) decoder->reached_end_of_data = 1;
    if (decoder->warnings++ == 0) (*cinfo->err->format_message)(cinfo, decoder->message);
}

static void output_message(j_common_ptr cinfo) {
    // Never printed: the library does not write to stderr.
    (void)cinfo;
}

static void progress_monitor(j_common_ptr cinfo) {
    cjpeg_decoder *decoder = decoder_of(cinfo);
    if (decoder->max_scans > 0 && decoder->cinfo.input_scan_number > decoder->max_scans) {
        decoder->exceeded_max_scans = 1;
        snprintf(decoder->message, sizeof decoder->message,
                 "more than %d progressive scans", decoder->max_scans);
        longjmp(decoder->jump, 1);
    }
}

static void init_source(j_decompress_ptr cinfo) { (void)cinfo; }
static void term_source(j_decompress_ptr cinfo) { (void)cinfo; }

static boolean fill_input_buffer(j_decompress_ptr cinfo) {
    cjpeg_decoder *decoder = decoder_of((j_common_ptr)cinfo);
    size_t got = 0;
    if (decoder->read) got = decoder->read(decoder->context, decoder->buffer, decoder->buffer_capacity);
    if (got == 0) {
        // Out of data: end the image here, as libjpeg's own sources do, and remember it.
        decoder->reached_end_of_data = 1;
        WARNMS(cinfo, JWRN_JPEG_EOF);
        decoder->source.next_input_byte = fake_end_of_image;
        decoder->source.bytes_in_buffer = 2;
        return TRUE;
    }
    decoder->source.next_input_byte = decoder->buffer;
    decoder->source.bytes_in_buffer = got;
    return TRUE;
}

static void skip_input_data(j_decompress_ptr cinfo, long count) {
    struct jpeg_source_mgr *source = cinfo->src;
    if (count <= 0) return;
    while ((size_t)count > source->bytes_in_buffer) {
        count -= (long)source->bytes_in_buffer;
        fill_input_buffer(cinfo);
        if (decoder_of((j_common_ptr)cinfo)->reached_end_of_data) return;
    }
    source->next_input_byte += count;
    source->bytes_in_buffer -= (size_t)count;
}

/// The next byte of the input (the source never suspends: at the end it gives a fake EOI).
static int next_byte(j_decompress_ptr cinfo) {
    struct jpeg_source_mgr *source = cinfo->src;
    if (source->bytes_in_buffer == 0) (*source->fill_input_buffer)(cinfo);
    source->bytes_in_buffer--;
    return *source->next_input_byte++;
}

/// Copies `count` bytes of the input into `destination`; 0 when the input ended first.
static int read_bytes(j_decompress_ptr cinfo, uint8_t *destination, size_t count) {
    struct jpeg_source_mgr *source = cinfo->src;
    cjpeg_decoder *decoder = decoder_of((j_common_ptr)cinfo);
    while (count > 0) {
        if (source->bytes_in_buffer == 0) {
            (*source->fill_input_buffer)(cinfo);
            if (decoder->reached_end_of_data) return 0;
        }
        size_t piece = count < source->bytes_in_buffer ? count : source->bytes_in_buffer;
        memcpy(destination, source->next_input_byte, piece);
        source->next_input_byte += piece;
        source->bytes_in_buffer -= piece;
        destination += piece;
        count -= piece;
    }
    return 1;
}

/// libjpeg's reader for APP1 and APP2: keeps the first EXIF and the ICC chunks, skips
/// every other one in place. Linear in the markers' bytes, whatever their number.
static boolean read_app1_app2(j_decompress_ptr cinfo) {
    cjpeg_decoder *decoder = decoder_of((j_common_ptr)cinfo);
    int marker = cinfo->unread_marker;
    long length = (long)(next_byte(cinfo) << 8);
    length += next_byte(cinfo);
    length -= 2;
    if (length <= 0) return TRUE;
    static const uint8_t exif_header[6] = { 'E', 'x', 'i', 'f', 0, 0 };
    static const uint8_t icc_header[12] = { 'I', 'C', 'C', '_', 'P', 'R', 'O', 'F', 'I', 'L', 'E', 0 };
    uint8_t header[14];
    long header_length = length < 14 ? length : 14;
    if (!read_bytes(cinfo, header, (size_t)header_length)) return TRUE;
    long rest = length - header_length;
    if (marker == JPEG_APP0 + 1 && decoder->exif == NULL && header_length >= 6
        && memcmp(header, exif_header, 6) == 0) {
        uint8_t *exif = malloc((size_t)length);
        if (exif != NULL) {
            memcpy(exif, header, (size_t)header_length);
            if (read_bytes(cinfo, exif + header_length, (size_t)rest)) {
                decoder->exif = exif;
                decoder->exif_length = (size_t)length;
            } else {
                free(exif);
            }
            return TRUE;
        }
    } else if (marker == JPEG_APP0 + 2 && header_length == 14 && rest > 0 && !decoder->icc_inconsistent
               && memcmp(header, icc_header, 12) == 0) {
        int sequence = header[12], count = header[13];
        if (decoder->icc_declared_count == 0) decoder->icc_declared_count = count;
        if (count != decoder->icc_declared_count || sequence == 0 || sequence > count
            || decoder->icc_chunks[sequence] != NULL) {
            decoder->icc_inconsistent = 1;
        } else {
            uint8_t *chunk = malloc((size_t)rest);
            if (chunk != NULL) {
                if (read_bytes(cinfo, chunk, (size_t)rest)) {
                    decoder->icc_chunks[sequence] = chunk;
                    decoder->icc_lengths[sequence] = (size_t)rest;
                } else {
                    free(chunk);
                }
                return TRUE;
            }
        }
    }
    if (rest > 0) (*cinfo->src->skip_input_data)(cinfo, rest);
    return TRUE;
}

int cjpeg_decoder_init(cjpeg_decoder *decoder,
                       const uint8_t *memory, size_t memory_size,
                       cjpeg_read_fn read, void *context, uint8_t *buffer, size_t capacity) {
    memset(decoder, 0, sizeof *decoder);
    decoder->memory = memory;
    decoder->memory_size = memory_size;
    decoder->read = memory ? NULL : read;
    decoder->context = context;
    decoder->buffer = buffer;
    decoder->buffer_capacity = capacity;

    decoder->cinfo.err = jpeg_std_error(&decoder->error);
    decoder->error.error_exit = error_exit;
    decoder->error.emit_message = emit_message;
    decoder->error.output_message = output_message;
    if (setjmp(decoder->jump)) return -1;
    jpeg_create_decompress(&decoder->cinfo);

    decoder->source.init_source = init_source;
    decoder->source.fill_input_buffer = fill_input_buffer;
    decoder->source.skip_input_data = skip_input_data;
    decoder->source.resync_to_restart = jpeg_resync_to_restart;
    decoder->source.term_source = term_source;
    decoder->source.next_input_byte = memory;
    decoder->source.bytes_in_buffer = memory ? memory_size : 0;
    decoder->cinfo.src = &decoder->source;

    decoder->progress.progress_monitor = progress_monitor;
    decoder->cinfo.progress = &decoder->progress;

    jpeg_set_marker_processor(&decoder->cinfo, JPEG_APP0 + 1, read_app1_app2);
    jpeg_set_marker_processor(&decoder->cinfo, JPEG_APP0 + 2, read_app1_app2);
    return 0;
}

void cjpeg_decoder_destroy(cjpeg_decoder *decoder) {
    jpeg_destroy_decompress(&decoder->cinfo);
    free(decoder->exif);
    decoder->exif = NULL;
    for (int sequence = 0; sequence < 256; sequence++) {
        free(decoder->icc_chunks[sequence]);
        decoder->icc_chunks[sequence] = NULL;
    }
}

int cjpeg_read_header(cjpeg_decoder *decoder) {
    if (setjmp(decoder->jump)) return -1;
    jpeg_read_header(&decoder->cinfo, TRUE);
    return 0;
}

int cjpeg_start_decompress(cjpeg_decoder *decoder) {
    if (setjmp(decoder->jump)) return -1;
    jpeg_start_decompress(&decoder->cinfo);
    return 0;
}

int cjpeg_read_scanlines(cjpeg_decoder *decoder, uint8_t **rows, uint32_t max_rows, uint32_t *rows_read) {
    *rows_read = 0;
    if (setjmp(decoder->jump)) return -1;
    *rows_read = jpeg_read_scanlines(&decoder->cinfo, rows, max_rows);
    return 0;
}

// ---- encoding ----------------------------------------------------------------

typedef struct encoder_state {
    struct jpeg_error_mgr error;  // first member: cinfo->err points here
    struct jpeg_destination_mgr destination;
    jmp_buf jump;
    char *message;
    size_t capacity;
    // The output, grown by doubling; owned here until handed over on success.
    uint8_t *buffer;
    size_t buffer_capacity;
} encoder_state;

static encoder_state *encoder_of(j_common_ptr cinfo) { return (encoder_state *)cinfo->err; }

static void encoder_error_exit(j_common_ptr cinfo) {
    encoder_state *state = encoder_of(cinfo);
    char text[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, text);
    if (state->capacity > 0) {
        strncpy(state->message, text, state->capacity - 1);
        state->message[state->capacity - 1] = 0;
    }
    longjmp(state->jump, 1);
}

static void destination_init(j_compress_ptr cinfo) {
    encoder_state *state = encoder_of((j_common_ptr)cinfo);
    state->destination.next_output_byte = state->buffer;
    state->destination.free_in_buffer = state->buffer_capacity;
}

static boolean destination_grow(j_compress_ptr cinfo) {
    // Called when the buffer is full (free_in_buffer is 0).
    encoder_state *state = encoder_of((j_common_ptr)cinfo);
    size_t used = state->buffer_capacity;
    uint8_t *grown = realloc(state->buffer, used * 2);
    if (!grown) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 0);
    state->buffer = grown;
    state->buffer_capacity = used * 2;
    state->destination.next_output_byte = grown + used;
    state->destination.free_in_buffer = used;
    return TRUE;
}

static void destination_term(j_compress_ptr cinfo) { (void)cinfo; }

static int encode_rows(struct jpeg_compress_struct *cinfo, encoder_state *state,
                       const uint8_t *pixels, uint32_t width, uint32_t height, size_t stride,
                       const cjpeg_encode_settings *settings) {
    if (setjmp(state->jump)) return -1;
    jpeg_create_compress(cinfo);
    state->destination.init_destination = destination_init;
    state->destination.empty_output_buffer = destination_grow;
    state->destination.term_destination = destination_term;
    cinfo->dest = &state->destination;
    cinfo->image_width = width;
    cinfo->image_height = height;
    cinfo->input_components = 4;
    cinfo->in_color_space = JCS_EXT_RGBA;
    jpeg_set_defaults(cinfo);
    jpeg_set_quality(cinfo, settings->quality, TRUE);
    cinfo->comp_info[0].h_samp_factor = settings->subsampling == 0 ? 1 : 2;
    cinfo->comp_info[0].v_samp_factor = settings->subsampling == 2 ? 2 : 1;
    if (settings->grayscale) jpeg_set_colorspace(cinfo, JCS_GRAYSCALE);
    if (settings->progressive) jpeg_simple_progression(cinfo);
    cinfo->optimize_coding = settings->optimize ? TRUE : FALSE;
    jpeg_start_compress(cinfo, TRUE);
    if (settings->exif && settings->exif_length > 0 && settings->exif_length <= 65527) {
        jpeg_write_m_header(cinfo, JPEG_APP0 + 1, settings->exif_length + 6);
        static const uint8_t exif_header[6] = { 'E', 'x', 'i', 'f', 0, 0 };
        for (int i = 0; i < 6; i++) jpeg_write_m_byte(cinfo, exif_header[i]);
        for (unsigned i = 0; i < settings->exif_length; i++) jpeg_write_m_byte(cinfo, settings->exif[i]);
    }
    if (settings->icc && settings->icc_length > 0) jpeg_write_icc_profile(cinfo, settings->icc, settings->icc_length);
    while (cinfo->next_scanline < cinfo->image_height) {
        JSAMPROW row = (JSAMPROW)(pixels + (size_t)cinfo->next_scanline * stride);
        jpeg_write_scanlines(cinfo, &row, 1);
    }
    jpeg_finish_compress(cinfo);
    return 0;
}

int cjpeg_encode_rgba(const uint8_t *pixels, uint32_t width, uint32_t height, size_t stride,
                      const cjpeg_encode_settings *settings,
                      uint8_t **output, unsigned long *output_size,
                      char *message, size_t message_capacity) {
    struct jpeg_compress_struct cinfo;
    encoder_state state;
    memset(&cinfo, 0, sizeof cinfo);
    memset(&state, 0, sizeof state);
    state.message = message;
    state.capacity = message_capacity;
    state.buffer_capacity = 16384;
    state.buffer = malloc(state.buffer_capacity);
    *output = NULL;
    *output_size = 0;
    if (!state.buffer) {
        snprintf(message, message_capacity, "out of memory");
        return -1;
    }
    cinfo.err = jpeg_std_error(&state.error);
    state.error.error_exit = encoder_error_exit;
    state.error.output_message = output_message;
    int result = encode_rows(&cinfo, &state, pixels, width, height, stride, settings);
    size_t written = state.buffer_capacity - state.destination.free_in_buffer;
    jpeg_destroy_compress(&cinfo);
    if (result != 0) {
        free(state.buffer);
        return -1;
    }
    *output = state.buffer;
    *output_size = written;
    return 0;
}

void cjpeg_free(void *pointer) { free(pointer); }

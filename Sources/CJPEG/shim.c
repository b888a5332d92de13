#include "CJPEG.h"

#include <jerror.h>
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

    jpeg_save_markers(&decoder->cinfo, JPEG_APP0 + 1, 0xFFFF);
    jpeg_save_markers(&decoder->cinfo, JPEG_APP0 + 2, 0xFFFF);
    return 0;
}

void cjpeg_decoder_destroy(cjpeg_decoder *decoder) {
    jpeg_destroy_decompress(&decoder->cinfo);
}

int cjpeg_read_header(cjpeg_decoder *decoder) {
    if (setjmp(decoder->jump)) return -1;
    jpeg_read_header(&decoder->cinfo, TRUE);
    return 0;
}

int cjpeg_calc_output_dimensions(cjpeg_decoder *decoder) {
    if (setjmp(decoder->jump)) return -1;
    jpeg_calc_output_dimensions(&decoder->cinfo);
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

int cjpeg_finish_decompress(cjpeg_decoder *decoder) {
    if (setjmp(decoder->jump)) return -1;
    jpeg_finish_decompress(&decoder->cinfo);
    return 0;
}

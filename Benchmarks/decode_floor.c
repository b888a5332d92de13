// decode_floor.c: what each format's reference decoder itself spends on a file, the
// floor under any thumbnail made from it (Benchmarks/matrix_compare.py's "floor" column).
//
//     cc -O2 -o .build/decode_floor Benchmarks/decode_floor.c -ljpeg -lpng16 -lwebp -lheif -lavif
//     .build/decode_floor [--reduce N] [--runs 9] FILE...
//     .build/decode_floor --encode WxH [--runs 9]
//
// Prints the median over runs of the time per file (the files' mean), in ms. With
// --encode, the time libjpeg-turbo takes to write a WxH thumbnail instead (quality 80,
// optimised Huffman tables, 4:2:0, as matrix_compare.py's engines write theirs; the
// pixels a smooth gradient with noise, standing in for a resized photo). Files are
// read into memory first; each is decoded to 8-bit interleaved pixels as a thumbnailer
// needs them, at the reduction a decoder can make while it decodes:
//   JPEG   libjpeg-turbo, scaled by 1/N in the IDCT (N = 1, 2, 4 or 8), to RGBX
//   PNG    libpng's simplified API, whole (PNG cannot reduce), to RGB or RGBA
//   WebP   libwebp, scaled by 1/N while decoding, to RGBA
//   HEIC   libheif, the primary image whole (tiles cannot reduce), to RGB(A)
//   AVIF   libavif, whole, YUV to RGBA
// The caller chooses N: matrix_compare.py passes the reduction the thumbnail chooses.
// Not part of the package's build; a damaged file exits (the inputs are the caller's own).
#include <stdio.h>  // before jpeglib.h, which uses FILE and size_t
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <avif/avif.h>
#include <jpeglib.h>
#include <libheif/heif.h>
#include <png.h>
#include <webp/decode.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void fail(const char *what) {
    fprintf(stderr, "decode_floor: %s\n", what);
    exit(1);
}

static void jpeg(const unsigned char *bytes, size_t size, int reduce) {
    struct jpeg_decompress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_decompress(&c);
    jpeg_mem_src(&c, bytes, (unsigned long)size);
    jpeg_read_header(&c, TRUE);
    c.scale_num = 1;
    c.scale_denom = (unsigned)reduce;
    c.out_color_space = JCS_EXT_RGBX;
    jpeg_start_decompress(&c);
    unsigned char *row = malloc((size_t)c.output_width * 4);
    JSAMPROW rows[1] = { row };
    while (c.output_scanline < c.output_height) jpeg_read_scanlines(&c, rows, 1);
    free(row);
    jpeg_finish_decompress(&c);
    jpeg_destroy_decompress(&c);
}

static void png(const unsigned char *bytes, size_t size) {
    png_image image;
    memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&image, bytes, size)) fail(image.message);
    image.format = (image.format & PNG_FORMAT_FLAG_ALPHA) ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB;
    void *pixels = malloc(PNG_IMAGE_SIZE(image));
    if (!png_image_finish_read(&image, NULL, pixels, 0, NULL)) fail(image.message);
    free(pixels);
}

static void webp(const unsigned char *bytes, size_t size, int reduce) {
    WebPDecoderConfig config;
    if (!WebPInitDecoderConfig(&config) || WebPGetFeatures(bytes, size, &config.input) != VP8_STATUS_OK)
        fail("not a WebP file");
    if (reduce > 1) {
        config.options.use_scaling = 1;
        config.options.scaled_width = (config.input.width + reduce - 1) / reduce;
        config.options.scaled_height = (config.input.height + reduce - 1) / reduce;
    }
    config.output.colorspace = MODE_RGBA;
    if (WebPDecode(bytes, size, &config) != VP8_STATUS_OK) fail("WebPDecode failed");
    WebPFreeDecBuffer(&config.output);
}

static void heic(const unsigned char *bytes, size_t size) {
    struct heif_context *context = heif_context_alloc();
    struct heif_image_handle *handle = NULL;
    struct heif_image *image = NULL;
    if (heif_context_read_from_memory_without_copy(context, bytes, size, NULL).code != heif_error_Ok
        || heif_context_get_primary_image_handle(context, &handle).code != heif_error_Ok)
        fail("not a HEIF file");
    enum heif_chroma chroma = heif_image_handle_has_alpha_channel(handle)
        ? heif_chroma_interleaved_RGBA : heif_chroma_interleaved_RGB;
    if (heif_decode_image(handle, &image, heif_colorspace_RGB, chroma, NULL).code != heif_error_Ok)
        fail("heif_decode_image failed");
    heif_image_release(image);
    heif_image_handle_release(handle);
    heif_context_free(context);
}

static void avif(const unsigned char *bytes, size_t size) {
    avifDecoder *decoder = avifDecoderCreate();
    decoder->maxThreads = 1;
    avifImage *image = avifImageCreateEmpty();
    if (avifDecoderReadMemory(decoder, image, bytes, size) != AVIF_RESULT_OK) fail("avifDecoderReadMemory failed");
    avifRGBImage rgb;
    avifRGBImageSetDefaults(&rgb, image);
    rgb.format = AVIF_RGB_FORMAT_RGBA;
    rgb.depth = 8;
    avifRGBImageAllocatePixels(&rgb);  // returns void in Debian 12's libavif 0.11
    if (avifImageYUVToRGB(image, &rgb) != AVIF_RESULT_OK) fail("avifImageYUVToRGB failed");
    avifRGBImageFreePixels(&rgb);
    avifImageDestroy(image);
    avifDecoderDestroy(decoder);
}

static void decode(const unsigned char *b, size_t size, int reduce) {
    if (size > 3 && b[0] == 0xFF && b[1] == 0xD8) jpeg(b, size, reduce);
    else if (size > 8 && memcmp(b, "\x89PNG", 4) == 0) png(b, size);
    else if (size > 12 && memcmp(b, "RIFF", 4) == 0 && memcmp(b + 8, "WEBP", 4) == 0) webp(b, size, reduce);
    else if (size > 12 && memcmp(b + 4, "ftypavif", 8) == 0) avif(b, size);
    else if (size > 12 && memcmp(b + 4, "ftyp", 4) == 0) heic(b, size);
    else fail("unknown format");
}

static void encode(const unsigned char *pixels, int width, int height) {
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    unsigned long size = 0;
    jpeg_mem_dest(&c, &out, &size);
    c.image_width = (JDIMENSION)width;
    c.image_height = (JDIMENSION)height;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 80, TRUE);
    c.optimize_coding = TRUE;
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(pixels + (size_t)c.next_scanline * (size_t)width * 3);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(out);
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int reduce = 1, runs = 9, first = 1, width = 0, height = 0;
    while (first + 1 < argc && strncmp(argv[first], "--", 2) == 0) {
        if (strcmp(argv[first], "--reduce") == 0) reduce = atoi(argv[first + 1]);
        else if (strcmp(argv[first], "--runs") == 0) runs = atoi(argv[first + 1]);
        else if (strcmp(argv[first], "--encode") == 0 && sscanf(argv[first + 1], "%dx%d", &width, &height) != 2) width = 0;
        first += 2;
    }
    if (width > 0 && height > 0 && width <= 16384 && height <= 16384 && runs > 0) {
        unsigned char *pixels = malloc((size_t)width * (size_t)height * 3);
        unsigned seed = 12345;
        for (int y = 0; y < height; y++)
            for (int x = 0; x < width; x++)
                for (int k = 0; k < 3; k++) {
                    seed = seed * 1103515245u + 12345u;
                    int value = (x * 255 / width + y * 255 / height) / 2 + k * 30 + (int)((seed >> 16) % 25) - 12;
                    pixels[((size_t)y * (size_t)width + (size_t)x) * 3 + (size_t)k] =
                        (unsigned char)(value < 0 ? 0 : value > 255 ? 255 : value);
                }
        encode(pixels, width, height);  // warm-up
        double *times = calloc((size_t)runs, sizeof *times);
        for (int run = 0; run < runs; run++) {
            double start = now();
            for (int i = 0; i < 5; i++) encode(pixels, width, height);
            times[run] = (now() - start) * 1000 / 5;
        }
        qsort(times, (size_t)runs, sizeof *times, compare);
        printf("%.3f\n", times[runs / 2]);
        return 0;
    }
    int count = argc - first;
    if (count < 1 || runs < 1 || reduce < 1 || reduce > 64) {
        fprintf(stderr, "usage: decode_floor [--reduce N] [--runs N] FILE...\n");
        return 2;
    }
    unsigned char **files = calloc((size_t)count, sizeof *files);
    size_t *sizes = calloc((size_t)count, sizeof *sizes);
    for (int i = 0; i < count; i++) {
        FILE *f = fopen(argv[first + i], "rb");
        if (!f || fseek(f, 0, SEEK_END) != 0) { perror(argv[first + i]); return 1; }
        sizes[i] = (size_t)ftell(f);
        rewind(f);
        files[i] = malloc(sizes[i]);
        if (fread(files[i], 1, sizes[i], f) != sizes[i]) { perror(argv[first + i]); return 1; }
        fclose(f);
    }
    for (int i = 0; i < count; i++) decode(files[i], sizes[i], reduce);  // warm-up
    double *times = calloc((size_t)runs, sizeof *times);
    for (int run = 0; run < runs; run++) {
        double start = now();
        for (int i = 0; i < count; i++) decode(files[i], sizes[i], reduce);
        times[run] = (now() - start) * 1000 / count;
    }
    qsort(times, (size_t)runs, sizeof *times, compare);
    printf("%.3f\n", times[runs / 2]);
    return 0;
}

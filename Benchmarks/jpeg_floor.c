// jpeg_floor.c: what libjpeg-turbo itself spends on a JPEG source, in three steps,
// the floor under any thumbnail made through it (the service's, thumbor's Pillow's).
//
//     cc -O2 -o .build/jpeg_floor Benchmarks/jpeg_floor.c -ljpeg
//     .build/jpeg_floor [--scale 2] [--runs 15] FILE...
//
// For each step, the median over runs of the time per file (the files' mean):
//   entropy     jpeg_read_coefficients: Huffman decoding only, every block
//   planes      + the scaled IDCT, raw Y, Cb, Cr planes (no upsampling, no colour)
//   rgbx        + upsampling and colour conversion, as the service decodes
// Memory sources, files read once beforehand. Not part of the package's build.
#include <stdio.h>  // before jpeglib.h, which uses FILE and size_t
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jpeglib.h>

enum step { ENTROPY, PLANES, RGBX, STEPS };
static const char *names[STEPS] = { "entropy", "planes", "rgbx" };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void decode(const unsigned char *bytes, size_t size, enum step step, int scale) {
    struct jpeg_decompress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);  // a broken file exits: the inputs are the caller's own
    jpeg_create_decompress(&c);
    jpeg_mem_src(&c, bytes, (unsigned long)size);
    jpeg_read_header(&c, TRUE);
    if (step == ENTROPY) {
        jpeg_read_coefficients(&c);
    } else {
        c.scale_num = 1;
        c.scale_denom = (unsigned)scale;
        if (step == PLANES) c.raw_data_out = TRUE;
        else c.out_color_space = JCS_EXT_RGBX;
        jpeg_start_decompress(&c);
        if (step == PLANES) {
            // One call takes an iMCU row: max_v_samp_factor * DCT_scaled_size rows of each plane.
            JSAMPROW rows[MAX_COMPONENTS][4 * DCTSIZE];
            JSAMPARRAY planes[MAX_COMPONENTS];
            int height = c.max_v_samp_factor * c.min_DCT_scaled_size;
            unsigned char *buffer = malloc((size_t)c.num_components * 4 * DCTSIZE * (c.output_width + 64));
            for (int ci = 0; ci < c.num_components; ci++) {
                planes[ci] = rows[ci];
                for (int r = 0; r < 4 * DCTSIZE; r++)
                    rows[ci][r] = buffer + ((size_t)ci * 4 * DCTSIZE + (size_t)r) * (c.output_width + 64);
            }
            while (c.output_scanline < c.output_height) jpeg_read_raw_data(&c, planes, (JDIMENSION)height);
            free(buffer);
        } else {
            unsigned char *row = malloc((size_t)c.output_width * 4);
            JSAMPROW rows[1] = { row };
            while (c.output_scanline < c.output_height) jpeg_read_scanlines(&c, rows, 1);
            free(row);
        }
    }
    jpeg_finish_decompress(&c);
    jpeg_destroy_decompress(&c);
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int scale = 2, runs = 15, first = 1;
    while (first + 1 < argc && strncmp(argv[first], "--", 2) == 0) {
        if (strcmp(argv[first], "--scale") == 0) scale = atoi(argv[first + 1]);
        else if (strcmp(argv[first], "--runs") == 0) runs = atoi(argv[first + 1]);
        first += 2;
    }
    int count = argc - first;
    if (count < 1 || runs < 1 || (scale != 1 && scale != 2 && scale != 4 && scale != 8)) {
        fprintf(stderr, "usage: jpeg_floor [--scale 1|2|4|8] [--runs N] FILE...\n");
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
    double *times = calloc((size_t)runs, sizeof *times);
    printf("%d files, 1/%d scale, median of %d runs, ms per file\n", count, scale, runs);
    for (int step = 0; step < STEPS; step++) {
        for (int run = 0; run < runs; run++) {
            double start = now();
            for (int i = 0; i < count; i++) decode(files[i], sizes[i], (enum step)step, scale);
            times[run] = (now() - start) * 1000 / count;
        }
        qsort(times, (size_t)runs, sizeof *times, compare);
        printf("%-8s %6.2f\n", names[step], times[runs / 2]);
    }
    return 0;
}

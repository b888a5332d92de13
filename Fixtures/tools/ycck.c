/* ycck.c IN.cmyk WIDTH HEIGHT OUT.jpg
 *
 * Fixture helper: writes raw CMYK samples (4 bytes a pixel, inks as amounts,
 * 0 = no ink) as an Adobe YCCK JPEG, which no Python writer produces. libjpeg
 * stores CMYK inverted in Adobe files, so the samples are inverted on the way in.
 * Build: gcc -O2 -o ycck ycck.c -ljpeg
 */
#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h>

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s IN.cmyk WIDTH HEIGHT OUT.jpg\n", argv[0]);
        return 2;
    }
    int width = atoi(argv[2]), height = atoi(argv[3]);
    size_t size = (size_t)width * height * 4;
    unsigned char *pixels = malloc(size);
    FILE *in = fopen(argv[1], "rb");
    if (!pixels || !in || fread(pixels, 1, size, in) != size) {
        fprintf(stderr, "cannot read %s\n", argv[1]);
        return 1;
    }
    fclose(in);
    for (size_t i = 0; i < size; i++) pixels[i] = 255 - pixels[i];

    struct jpeg_compress_struct cinfo;
    struct jpeg_error_mgr jerr;
    cinfo.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&cinfo);
    FILE *out = fopen(argv[4], "wb");
    if (!out) return 1;
    jpeg_stdio_dest(&cinfo, out);
    cinfo.image_width = width;
    cinfo.image_height = height;
    cinfo.input_components = 4;
    cinfo.in_color_space = JCS_CMYK;
    jpeg_set_defaults(&cinfo);
    jpeg_set_colorspace(&cinfo, JCS_YCCK);  /* also writes the Adobe marker, transform 2 */
    jpeg_set_quality(&cinfo, 92, TRUE);
    jpeg_start_compress(&cinfo, TRUE);
    while (cinfo.next_scanline < cinfo.image_height) {
        JSAMPROW row = pixels + (size_t)cinfo.next_scanline * width * 4;
        jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
    jpeg_destroy_compress(&cinfo);
    fclose(out);
    free(pixels);
    return 0;
}

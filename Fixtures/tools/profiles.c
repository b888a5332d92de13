/* profiles.c OUTDIR
 *
 * Fixture helper: writes two ICC profiles made with Little CMS for the colour tests.
 *   swapped-rg.icc  RGB, sRGB's primaries with red and green swapped, gamma 2.2:
 *                   converted to sRGB, pure red must come out green.
 *   warm-cmyk.icc   CMYK (A2B0 only, 9-point CLUT to Lab): inks like the naive formula,
 *                   but on warm paper, so a conversion by profile differs visibly from
 *                   the naive one.
 * Build: gcc -O2 -o profiles profiles.c -llcms2
 */
#include <lcms2.h>
#include <stdio.h>
#include <string.h>

static cmsHTRANSFORM to_lab;

static int sample(const cmsUInt16Number in[], cmsUInt16Number out[], void *cargo) {
    (void)cargo;
    double c = in[0] / 65535.0, m = in[1] / 65535.0, y = in[2] / 65535.0, k = in[3] / 65535.0;
    double rgb[3] = {(1 - c) * (1 - k), (1 - m) * (1 - k), (1 - y) * (1 - k)};
    rgb[0] = rgb[0] * 0.98 + 0.02;
    rgb[1] = rgb[1] * 0.95 + 0.02;
    rgb[2] = rgb[2] * 0.85;
    cmsCIELab lab;
    cmsDoTransform(to_lab, rgb, &lab, 1);
    cmsFloat2LabEncoded(out, &lab);
    return TRUE;
}

static void describe(cmsHPROFILE profile, const char *text) {
    cmsMLU *mlu = cmsMLUalloc(0, 1);
    cmsMLUsetASCII(mlu, "en", "US", text);
    cmsWriteTag(profile, cmsSigProfileDescriptionTag, mlu);
    cmsMLUsetASCII(mlu, "en", "US", "No copyright, use freely");
    cmsWriteTag(profile, cmsSigCopyrightTag, mlu);
    cmsMLUfree(mlu);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
        return 2;
    }
    char path[4096];

    cmsCIExyY white;
    cmsWhitePointFromTemp(&white, 6504);
    cmsCIExyYTRIPLE primaries = {{0.30, 0.60, 1.0}, {0.64, 0.33, 1.0}, {0.15, 0.06, 1.0}};
    cmsToneCurve *gamma = cmsBuildGamma(NULL, 2.2);
    cmsToneCurve *curves[3] = {gamma, gamma, gamma};
    cmsHPROFILE swapped = cmsCreateRGBProfile(&white, &primaries, curves);
    describe(swapped, "Swapped red and green primaries (test)");
    cmsSetHeaderRenderingIntent(swapped, INTENT_RELATIVE_COLORIMETRIC);
    snprintf(path, sizeof path, "%s/swapped-rg.icc", argv[1]);
    if (!cmsSaveProfileToFile(swapped, path)) return 1;
    cmsCloseProfile(swapped);
    cmsFreeToneCurve(gamma);

    cmsHPROFILE srgb = cmsCreate_sRGBProfile();
    cmsHPROFILE lab = cmsCreateLab4Profile(NULL);
    to_lab = cmsCreateTransform(srgb, TYPE_RGB_DBL, lab, TYPE_Lab_DBL, INTENT_RELATIVE_COLORIMETRIC, 0);
    cmsHPROFILE cmyk = cmsCreateProfilePlaceholder(NULL);
    cmsSetProfileVersion(cmyk, 2.1);  // lut16 holds a bare CLUT; v4 mAB would need curves around it
    cmsSetDeviceClass(cmyk, cmsSigOutputClass);
    cmsSetColorSpace(cmyk, cmsSigCmykData);
    cmsSetPCS(cmyk, cmsSigLabData);
    cmsPipeline *pipeline = cmsPipelineAlloc(NULL, 4, 3);
    cmsStage *clut = cmsStageAllocCLut16bit(NULL, 9, 4, 3, NULL);
    cmsStageSampleCLut16bit(clut, sample, NULL, 0);
    cmsPipelineInsertStage(pipeline, cmsAT_BEGIN, clut);
    cmsWriteTag(cmyk, cmsSigAToB0Tag, pipeline);
    cmsWriteTag(cmyk, cmsSigMediaWhitePointTag, cmsD50_XYZ());
    describe(cmyk, "Warm paper CMYK (test)");
    snprintf(path, sizeof path, "%s/warm-cmyk.icc", argv[1]);
    if (!cmsSaveProfileToFile(cmyk, path)) return 1;
    cmsPipelineFree(pipeline);
    cmsCloseProfile(cmyk);
    cmsDeleteTransform(to_lab);
    cmsCloseProfile(srgb);
    cmsCloseProfile(lab);
    return 0;
}

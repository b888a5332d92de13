// CResample: the resampler's inner loops with AVX2 and FMA, chosen at run time.
//
// The Swift resizer (RasterImage's StreamingResizer) keeps its own portable loops and
// calls these only when `cresample_has_avx2()` says the CPU has AVX2 and FMA; the
// functions are compiled for those instructions alone (target attributes), so the rest
// of the package still runs on any x86-64 or ARM machine. Pixels are four floats
// (RGBA, 16 bytes); tap tables are those of the resizer (starts and counts per output,
// `stride` weights per output, each weight splatted into four lanes).
#ifndef CRESAMPLE_H
#define CRESAMPLE_H

#include <stddef.h>
#include <stdint.h>

/// Whether this CPU runs the kernels below (AVX2 and FMA); checked once.
int cresample_has_avx2(void);

/// Filters `rows` (1 to 4) rows of `source` (`rowStride` floats apart) through the
/// horizontal taps into `targets[r]` (`outputWidth` pixels each), each sum scaled by `scale`.
void cresample_horizontal(
    const float *source, ptrdiff_t rowStride, int rows, float *const *targets, const intptr_t *starts,
    const intptr_t *counts, const float *splatWeights, intptr_t stride, intptr_t outputWidth, float scale);

/// Sums `count` rows (`rows[i]`, `width` pixels each) weighted by `taps[i]` into `sums`,
/// and, when `out` is not NULL, also stores them as bytes (each value clamped to
/// 0...255, plus 0.5, truncated).
void cresample_vertical(
    const float *const *rows, intptr_t count, const float *taps, intptr_t width, float *sums, uint8_t *out);

/// Two output rows at once, stored as bytes as cresample_vertical stores them: `count`
/// rows (the union of both outputs' taps) weighted by `taps0[i]` into `out0` and by
/// `taps1[i]` into `out1` (zero where a row is not one of that output's taps). Each row
/// is read once for both; the sums are those of two cresample_vertical calls.
void cresample_vertical_pair(
    const float *const *rows, intptr_t count, const float *taps0, const float *taps1, intptr_t width, uint8_t *out0,
    uint8_t *out1);

/// Widens `count` pixels of 4 bytes to 4 floats each.
void cresample_widen(const uint8_t *row, intptr_t count, float *out);

#endif

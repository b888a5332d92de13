#include "CResample.h"

#if defined(__x86_64__)
#include <immintrin.h>

// Compiled for AVX2 and FMA only here; callers ask cresample_has_avx2() first.
#define AVX2 __attribute__((target("avx2,fma")))

int cresample_has_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

// `rows` is a constant at each call below, so the row loops unroll.
AVX2 static inline __attribute__((always_inline)) void horizontal_rows(
    const float *source, ptrdiff_t rowStride, const int rows, float *const *targets, const intptr_t *starts,
    const intptr_t *counts, const float *splatWeights, intptr_t stride, intptr_t outputWidth, float scale) {
    const __m128 factor = _mm_set1_ps(scale);
    for (intptr_t x = 0; x < outputWidth; x++) {
        const float *p = source + starts[x] * 4;
        const float *w = splatWeights + x * stride * 4;
        const intptr_t n = counts[x];
        // Two sums a row (even and odd tap pairs), so consecutive FMAs do not wait on each other.
        __m256 a[4], b[4];
        __m128 tail[4];
        for (int r = 0; r < rows; r++) {
            a[r] = _mm256_setzero_ps();
            b[r] = _mm256_setzero_ps();
            tail[r] = _mm_setzero_ps();
        }
        intptr_t j = 0;
        for (; j + 4 <= n; j += 4) {
            // Taps j and j + 1 in one register (each weight in four lanes), j + 2 and j + 3 in another.
            const __m256 w0 = _mm256_loadu_ps(w + j * 4);
            const __m256 w1 = _mm256_loadu_ps(w + j * 4 + 8);
            for (int r = 0; r < rows; r++) {
                a[r] = _mm256_fmadd_ps(_mm256_loadu_ps(p + r * rowStride + j * 4), w0, a[r]);
                b[r] = _mm256_fmadd_ps(_mm256_loadu_ps(p + r * rowStride + j * 4 + 8), w1, b[r]);
            }
        }
        if (j + 2 <= n) {
            const __m256 w0 = _mm256_loadu_ps(w + j * 4);
            for (int r = 0; r < rows; r++) a[r] = _mm256_fmadd_ps(_mm256_loadu_ps(p + r * rowStride + j * 4), w0, a[r]);
            j += 2;
        }
        if (j < n) {
            const __m128 w0 = _mm_loadu_ps(w + j * 4);
            for (int r = 0; r < rows; r++) tail[r] = _mm_mul_ps(_mm_loadu_ps(p + r * rowStride + j * 4), w0);
        }
        for (int r = 0; r < rows; r++) {
            const __m256 s = _mm256_add_ps(a[r], b[r]);
            __m128 v = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
            v = _mm_mul_ps(_mm_add_ps(v, tail[r]), factor);
            _mm_storeu_ps(targets[r] + x * 4, v);
        }
    }
}

AVX2 static void horizontal_avx2(
    const float *source, ptrdiff_t rowStride, int rows, float *const *targets, const intptr_t *starts,
    const intptr_t *counts, const float *splatWeights, intptr_t stride, intptr_t outputWidth, float scale) {
    int done = 0;
    for (; done + 4 <= rows; done += 4)
        horizontal_rows(source + done * rowStride, rowStride, 4, targets + done, starts, counts, splatWeights, stride,
                        outputWidth, scale);
    for (; done < rows; done++)
        horizontal_rows(source + done * rowStride, rowStride, 1, targets + done, starts, counts, splatWeights, stride,
                        outputWidth, scale);
}

void cresample_horizontal(
    const float *source, ptrdiff_t rowStride, int rows, float *const *targets, const intptr_t *starts,
    const intptr_t *counts, const float *splatWeights, intptr_t stride, intptr_t outputWidth, float scale) {
    horizontal_avx2(source, rowStride, rows, targets, starts, counts, splatWeights, stride, outputWidth, scale);
}

// 32 floats to 32 bytes: clamped to 0...255, plus 0.5, truncated (as the Swift quantiser).
AVX2 static inline __attribute__((always_inline)) void quantize32(const __m256 s[4], uint8_t *out) {
    const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(255), half = _mm256_set1_ps(0.5f);
    __m256i q[4];
    for (int k = 0; k < 4; k++)
        q[k] = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_min_ps(_mm256_max_ps(s[k], zero), top), half));
    // The packs work within 128-bit lanes; the permute puts the 4-byte groups back in order.
    const __m256i words = _mm256_packus_epi16(_mm256_packus_epi32(q[0], q[1]), _mm256_packus_epi32(q[2], q[3]));
    const __m256i ordered = _mm256_permutevar8x32_epi32(words, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)out, ordered);
}

// 4 floats to 4 bytes, as quantize32.
AVX2 static inline __attribute__((always_inline)) void quantize4(__m128 s, uint8_t *out) {
    const __m128 v = _mm_add_ps(_mm_min_ps(_mm_max_ps(s, _mm_setzero_ps()), _mm_set1_ps(255)), _mm_set1_ps(0.5f));
    const __m128i q = _mm_cvttps_epi32(v);
    const __m128i bytes = _mm_packus_epi16(_mm_packus_epi32(q, q), _mm_setzero_si128());
    const int word = _mm_cvtsi128_si32(bytes);
    __builtin_memcpy(out, &word, 4);
}

AVX2 static void vertical_avx2(
    const float *const *rows, intptr_t count, const float *taps, intptr_t width, float *sums, uint8_t *out) {
    const intptr_t n = width * 4;
    intptr_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 w = _mm256_set1_ps(taps[0]);
        const float *r = rows[0] + i;
        __m256 s[4];
        for (int k = 0; k < 4; k++) s[k] = _mm256_mul_ps(_mm256_loadu_ps(r + 8 * k), w);
        for (intptr_t t = 1; t < count; t++) {
            w = _mm256_set1_ps(taps[t]);
            r = rows[t] + i;
            for (int k = 0; k < 4; k++) s[k] = _mm256_fmadd_ps(_mm256_loadu_ps(r + 8 * k), w, s[k]);
        }
        for (int k = 0; k < 4; k++) _mm256_storeu_ps(sums + i + 8 * k, s[k]);
        if (out) quantize32(s, out + i);
    }
    // The last pixels, fewer than eight: one at a time, quantised as above.
    for (; i < n; i += 4) {
        __m128 s = _mm_mul_ps(_mm_loadu_ps(rows[0] + i), _mm_set1_ps(taps[0]));
        for (intptr_t t = 1; t < count; t++) s = _mm_fmadd_ps(_mm_loadu_ps(rows[t] + i), _mm_set1_ps(taps[t]), s);
        _mm_storeu_ps(sums + i, s);
        if (out) quantize4(s, out + i);
    }
}

void cresample_vertical(
    const float *const *rows, intptr_t count, const float *taps, intptr_t width, float *sums, uint8_t *out) {
    vertical_avx2(rows, count, taps, width, sums, out);
}

AVX2 static void vertical_pair_avx2(
    const float *const *rows, intptr_t count, const float *taps0, const float *taps1, intptr_t width, uint8_t *out0,
    uint8_t *out1) {
    const intptr_t n = width * 4;
    intptr_t i = 0;
    for (; i + 32 <= n; i += 32) {
        // Each row's 32 floats loaded once for both outputs.
        __m256 s[4], t[4];
        for (int k = 0; k < 4; k++) s[k] = t[k] = _mm256_setzero_ps();
        for (intptr_t r = 0; r < count; r++) {
            const __m256 w0 = _mm256_set1_ps(taps0[r]), w1 = _mm256_set1_ps(taps1[r]);
            const float *row = rows[r] + i;
            for (int k = 0; k < 4; k++) {
                const __m256 v = _mm256_loadu_ps(row + 8 * k);
                s[k] = _mm256_fmadd_ps(v, w0, s[k]);
                t[k] = _mm256_fmadd_ps(v, w1, t[k]);
            }
        }
        quantize32(s, out0 + i);
        quantize32(t, out1 + i);
    }
    for (; i < n; i += 4) {
        __m128 s = _mm_setzero_ps(), t = _mm_setzero_ps();
        for (intptr_t r = 0; r < count; r++) {
            const __m128 v = _mm_loadu_ps(rows[r] + i);
            s = _mm_fmadd_ps(v, _mm_set1_ps(taps0[r]), s);
            t = _mm_fmadd_ps(v, _mm_set1_ps(taps1[r]), t);
        }
        quantize4(s, out0 + i);
        quantize4(t, out1 + i);
    }
}

void cresample_vertical_pair(
    const float *const *rows, intptr_t count, const float *taps0, const float *taps1, intptr_t width, uint8_t *out0,
    uint8_t *out1) {
    vertical_pair_avx2(rows, count, taps0, taps1, width, out0, out1);
}

AVX2 static void widen_avx2(const uint8_t *row, intptr_t count, float *out) {
    intptr_t i = 0;
    for (; i + 8 <= count; i += 8) {
        const __m256i bytes = _mm256_loadu_si256((const __m256i *)(row + i * 4));
        const __m128i lo = _mm256_castsi256_si128(bytes), hi = _mm256_extracti128_si256(bytes, 1);
        _mm256_storeu_ps(out + i * 4, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)));
        _mm256_storeu_ps(out + i * 4 + 8, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8))));
        _mm256_storeu_ps(out + i * 4 + 16, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)));
        _mm256_storeu_ps(out + i * 4 + 24, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))));
    }
    for (; i < count; i++) {
        int word;
        __builtin_memcpy(&word, row + i * 4, 4);
        _mm_storeu_ps(out + i * 4, _mm_cvtepi32_ps(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(word))));
    }
}

void cresample_widen(const uint8_t *row, intptr_t count, float *out) { widen_avx2(row, count, out); }

#else

// Other CPUs: the Swift loops run instead (cresample_has_avx2() is 0, so these are never called).
int cresample_has_avx2(void) { return 0; }

void cresample_horizontal(
    const float *source, ptrdiff_t rowStride, int rows, float *const *targets, const intptr_t *starts,
    const intptr_t *counts, const float *splatWeights, intptr_t stride, intptr_t outputWidth, float scale) {
    (void)source, (void)rowStride, (void)rows, (void)targets, (void)starts, (void)counts, (void)splatWeights;
    (void)stride, (void)outputWidth, (void)scale;
}

void cresample_vertical(
    const float *const *rows, intptr_t count, const float *taps, intptr_t width, float *sums, uint8_t *out) {
    (void)rows, (void)count, (void)taps, (void)width, (void)sums, (void)out;
}

void cresample_widen(const uint8_t *row, intptr_t count, float *out) { (void)row, (void)count, (void)out; }

void cresample_vertical_pair(
    const float *const *rows, intptr_t count, const float *taps0, const float *taps1, intptr_t width, uint8_t *out0,
    uint8_t *out1) {
    (void)rows, (void)count, (void)taps0, (void)taps1, (void)width, (void)out0, (void)out1;
}

#endif

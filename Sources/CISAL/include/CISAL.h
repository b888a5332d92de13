// CISAL: ISA-L's inflate (Intel's Intelligent Storage Acceleration Library). It reports
// errors by return codes; the one shim clears the vector registers' upper halves after it.
#ifndef CISAL_H
#define CISAL_H
#include <isa-l/igzip_lib.h>

/// isal_inflate, then VZEROUPPER where the processor has AVX. ISA-L 2.30's inflate (its
/// hand-written vector loop, `decode_huffman_code_block_stateless_04` on the AMD EPYC
/// we measure on) returns with the upper halves of the vector registers in use, and the
/// SSE instructions after it (Swift's SIMD code is SSE) then paid for that: the resizer
/// and the PNG filters took twice their time after an ISA-L inflate on the same thread.
int cisal_inflate(struct inflate_state *state);

/// Whether the upper halves of the AVX registers are in use on this thread now (XGETBV's
/// XINUSE bitmap): 1 or 0, or -1 where the processor cannot say. For tests.
int cisal_avx_upper_in_use(void);

#endif

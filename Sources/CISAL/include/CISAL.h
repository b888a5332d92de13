// CISAL: ISA-L's inflate and CRC32C (Intel's Intelligent Storage Acceleration Library).
// They report errors by return codes; the shims clear the vector registers' upper halves
// after them, and take a length of any size for the CRC's 32-bit one.
#ifndef CISAL_H
#define CISAL_H
#include <stddef.h>
#include <stdint.h>
#include <isa-l/igzip_lib.h>
#include <isa-l/crc.h>

/// isal_inflate, then VZEROUPPER where the processor has AVX. ISA-L 2.30's inflate (its
/// hand-written vector loop, `decode_huffman_code_block_stateless_04` on the AMD EPYC
/// we measure on) returns with the upper halves of the vector registers in use, and the
/// SSE instructions after it (Swift's SIMD code is SSE) then paid for that: the resizer
/// and the PNG filters took twice their time after an ISA-L inflate on the same thread.
int cisal_inflate(struct inflate_state *state);

/// The CRC32C (Castagnoli, iSCSI's) of `length` bytes, continuing from `crc` (0 to
/// start): ISA-L's `crc32_iscsi`, about 20 GB/s on the machines we measure on, called
/// in pieces that fit its `int` length, then VZEROUPPER as for inflate.
uint32_t cisal_crc32c(const void *bytes, size_t length, uint32_t crc);

/// Whether the upper halves of the AVX registers are in use on this thread now (XGETBV's
/// XINUSE bitmap): 1 or 0, or -1 where the processor cannot say. For tests.
int cisal_avx_upper_in_use(void);

#endif

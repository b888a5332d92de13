#include "CISAL.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

static void clear_upper_halves(void) {
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_supports("avx")) {
        __asm__ volatile("vzeroupper" ::: "memory");
    }
#endif
}

int cisal_inflate(struct inflate_state *state) {
    int result = isal_inflate(state);
    clear_upper_halves();
    return result;
}

uint32_t cisal_crc32c(const void *bytes, size_t length, uint32_t crc) {
    const unsigned char *next = (const unsigned char *)bytes;
    while (length > 0) {
        size_t piece = length > (1u << 30) ? (1u << 30) : length;
        crc = crc32_iscsi((unsigned char *)next, (int)piece, crc);
        next += piece;
        length -= piece;
    }
    clear_upper_halves();
    return crc;
}

int cisal_avx_upper_in_use(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned int eax, ebx, ecx, edx;
    // XGETBV with ECX = 1 (the XINUSE bitmap) exists when CPUID.(EAX=0DH, ECX=1):EAX bit 2 is set.
    if (!__builtin_cpu_supports("avx") || !__get_cpuid_count(0xD, 1, &eax, &ebx, &ecx, &edx) || !(eax & 4)) {
        return -1;
    }
    unsigned int low, high;
    __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(1));
    (void)high;
    return (int)((low >> 2) & 1);
#else
    return -1;
#endif
}

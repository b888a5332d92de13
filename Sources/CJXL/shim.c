#include "CJXL.h"
#include <stdlib.h>

// Every block carries its size in a header of 32 bytes, which keeps the alignment
// malloc gives (libjxl asks for nothing stricter of its manager: it aligns itself).
#define CJXL_HEADER 32

static void *cjxl_alloc(void *opaque, size_t size) {
    cjxl_memory *memory = opaque;
    if (size > memory->limit) {
        __atomic_store_n(&memory->refused, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    size_t total = size + CJXL_HEADER;
    size_t now = __atomic_add_fetch(&memory->in_use, total, __ATOMIC_RELAXED);
    if (now > memory->limit) {
        __atomic_sub_fetch(&memory->in_use, total, __ATOMIC_RELAXED);
        __atomic_store_n(&memory->refused, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    size_t peak = __atomic_load_n(&memory->peak, __ATOMIC_RELAXED);
    while (now > peak && !__atomic_compare_exchange_n(&memory->peak, &peak, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    unsigned char *block = malloc(total);
    if (block == NULL) {
        __atomic_sub_fetch(&memory->in_use, total, __ATOMIC_RELAXED);
        return NULL;
    }
    *(size_t *)block = total;
    return block + CJXL_HEADER;
}

static void cjxl_free(void *opaque, void *address) {
    if (address == NULL) return;
    cjxl_memory *memory = opaque;
    unsigned char *block = (unsigned char *)address - CJXL_HEADER;
    __atomic_sub_fetch(&memory->in_use, *(size_t *)block, __ATOMIC_RELAXED);
    free(block);
}

JxlMemoryManager cjxl_counting_manager(cjxl_memory *memory) {
    JxlMemoryManager manager = { memory, cjxl_alloc, cjxl_free };
    return manager;
}

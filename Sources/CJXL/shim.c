#define _GNU_SOURCE
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

// ---- Standard-error capture (see cjxl_capture in CJXL.h) ----

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static __thread cjxl_capture *cjxl_active_capture;

cjxl_capture *cjxl_capture_begin(cjxl_capture *capture) {
    cjxl_capture *previous = cjxl_active_capture;
    cjxl_active_capture = capture;
    return previous;
}

void cjxl_capture_end(cjxl_capture *previous) { cjxl_active_capture = previous; }

typedef int (*cjxl_vfprintf_chk_fn)(FILE *, int, const char *, va_list);

// The C library's own function, looked up once (dlsym is thread-safe; a race stores
// the same pointer twice).
static cjxl_vfprintf_chk_fn cjxl_next_vfprintf_chk(void) {
    static cjxl_vfprintf_chk_fn next;
    cjxl_vfprintf_chk_fn found = __atomic_load_n(&next, __ATOMIC_ACQUIRE);
    if (found == NULL) {
        found = (cjxl_vfprintf_chk_fn)dlsym(RTLD_NEXT, "__vfprintf_chk");
        __atomic_store_n(&next, found, __ATOMIC_RELEASE);
    }
    return found;
}

int __vfprintf_chk(FILE *stream, int flag, const char *format, va_list arguments) {
    cjxl_capture *capture = cjxl_active_capture;
    if (capture != NULL && stream == stderr) {
        if (capture->lines++ == 0) {
            int length = vsnprintf(capture->first_line, sizeof capture->first_line, format, arguments);
            char *newline = strchr(capture->first_line, '\n');
            if (newline != NULL) *newline = 0;
            return length < 0 ? 0 : length;
        }
        return 0;
    }
    cjxl_vfprintf_chk_fn next = cjxl_next_vfprintf_chk();
    return next == NULL ? -1 : next(stream, flag, format, arguments);
}

int __fprintf_chk(FILE *stream, int flag, const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    int result = __vfprintf_chk(stream, flag, format, arguments);
    va_end(arguments);
    return result;
}

// CJXL: libjxl's decoder and encoder, and a JxlMemoryManager that counts what libjxl
// allocates and refuses to go past a cap. libjxl reports errors by status codes, so
// nothing else needs a shim.
#ifndef CJXL_H
#define CJXL_H
#include <stddef.h>
#include <stdint.h>
#include <jxl/decode.h>
#include <jxl/encode.h>

/// The state behind a counting memory manager: what libjxl holds now, the most it
/// held, and the cap. One per decoder or encoder; libjxl may call it from its own
/// threads, so the counts are atomic.
typedef struct cjxl_memory {
    size_t limit;
    size_t in_use;
    size_t peak;
    int refused;
} cjxl_memory;

/// A JxlMemoryManager whose allocations are counted in `memory` and fail (return NULL,
/// which libjxl reports as an error) once they would take more than `memory->limit`
/// bytes in all. `memory` must outlive every decoder or encoder made with it.
JxlMemoryManager cjxl_counting_manager(cjxl_memory *memory);

#endif

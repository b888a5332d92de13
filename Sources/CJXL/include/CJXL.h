// CJXL: libjxl's decoder and encoder, a JxlMemoryManager that counts what libjxl
// allocates and refuses to go past a cap, and a capture of the failure traces libjxl
// prints to standard error. libjxl reports errors by status codes, so nothing else
// needs a shim.
#ifndef CJXL_H
#define CJXL_H
#include <stddef.h>
#include <stdint.h>
#include <jxl/decode.h>
#include <jxl/encode.h>

/// Opens libjxl (once per process; `IMAGELOADER_JXL_LIBRARY` may name another file;
/// lazy.c, written by scripts/generate-lazy-libraries.py). Returns 1 when every
/// function RasterImage calls was found, else 0 with `*error` saying why. No libjxl
/// function may be called before it returned 1.
int cjxl_load_library(const char **error);

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

/// libjxl 0.7 as Debian builds it prints a trace line to standard error at each
/// failure it passes up (`JXL_FAILURE`, `JXL_RETURN_IF_ERROR`), from a function it does
/// not export. The shim defines the two fortified stdio entry points those traces go
/// through (`__fprintf_chk`, `__vfprintf_chk`), so the dynamic linker binds libjxl's
/// calls to them (libjxl is opened at run time; the linker exports the executable's
/// definitions of these two because the C library defines them too, and a library
/// opened later finds the executable's first): while the calling thread is inside a capture, what it writes to
/// standard error is kept in `capture` (the first line, cut to its size) instead of
/// printed; every other call, and every other thread, goes on to the C library's own
/// function. libjxl runs on the thread that calls it (no parallel runner is set), so
/// a capture sees exactly its own decode's traces.
typedef struct cjxl_capture {
    char first_line[160];
    unsigned lines;
} cjxl_capture;

/// Starts capturing the calling thread's standard-error output into `capture`;
/// returns the capture that was active before (captures nest), to be given back to
/// `cjxl_capture_end`.
cjxl_capture *cjxl_capture_begin(cjxl_capture *capture);

/// Ends the calling thread's current capture and makes `previous` active again.
void cjxl_capture_end(cjxl_capture *previous);

#endif

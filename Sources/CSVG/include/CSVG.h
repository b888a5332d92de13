// CSVG: librsvg (with cairo) opened at run time, when the first SVG is rendered, so
// that a process that never meets an SVG maps none of librsvg's libraries (librsvg.h
// declares what rendering calls; lazy.c defines it).
#ifndef CSVG_H
#define CSVG_H
#include <stddef.h>
#include <stdint.h>

/// Opens librsvg on first use; 0 with the reason in `*error` when it cannot be (not
/// installed, or a version without a function called here). Defined in lazy.c.
int csvg_load_library(const char **error);

/// Renders the document `data` (`size` bytes, no base location: librsvg can resolve
/// no external reference) scaled to fill `width` x `height`, into `pixels` (premultiplied
/// BGRA in memory, `width * 4` bytes a row, cleared first). Returns 0, or -1 with
/// librsvg's or cairo's message in `message` (`message_size` bytes at most).
int csvg_render(const uint8_t *data, size_t size, int width, int height, uint8_t *pixels, char *message,
                size_t message_size);

#endif

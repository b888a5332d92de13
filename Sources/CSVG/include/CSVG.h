// CSVG: librsvg (with cairo) opened at run time, when the first SVG is rendered, so
// that a process that never meets an SVG maps none of librsvg's libraries. Only what
// rendering needs is declared here; the prototypes are librsvg 2.52's and cairo 1.16's.
#ifndef CSVG_H
#define CSVG_H
#include <stddef.h>
#include <stdint.h>

/// Whether librsvg could be opened (`librsvg-2.so.2`, Debian's librsvg2-2); opens it
/// on the first call.
int csvg_available(void);

/// Renders the document `data` (`size` bytes, no base location: librsvg can resolve
/// no external reference) scaled to fill `width` x `height`, into `pixels` (premultiplied
/// BGRA in memory, `width * 4` bytes a row, cleared first). Returns 0, or -1 with
/// librsvg's or cairo's message in `message` (`message_size` bytes at most).
int csvg_render(const uint8_t *data, size_t size, int width, int height, uint8_t *pixels, char *message,
                size_t message_size);

#endif

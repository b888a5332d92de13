// CDeflate: libdeflate reports errors by return codes, so no shim is needed; this
// header only makes libdeflate.h importable.
#ifndef CDEFLATE_H
#define CDEFLATE_H
#include <libdeflate.h>
#endif

/* Test-only stand-in for Windows' bcryptprimitives.dll, for running Rust programs under
 * Debian 12's wine 8.0, which lacks that DLL: Rust's standard library (1.78 and later) takes
 * its random bytes from ProcessPrng there, and the program would not start. This one fills
 * the buffer from RtlGenRandom (advapi32's SystemFunction036), which wine has. It is copied
 * into the wine prefix's system32 by .ci/cross_build.sh and never shipped: on Windows 10 and
 * later the system's own DLL is used.
 * Build: x86_64-w64-mingw32-gcc -shared -O2 -o bcryptprimitives.dll bcryptprimitives.c bcryptprimitives.def -ladvapi32
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!SystemFunction036(data, n)) return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}

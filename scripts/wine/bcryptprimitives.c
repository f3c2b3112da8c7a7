/* A stand-in for bcryptprimitives.dll, for running test programs under Wine 8.0 (Debian 12),
 * which lacks it: Rust's standard library imports ProcessPrng from it on Windows (Windows 10
 * and later have it). It fills the buffer from RtlGenRandom (advapi32's SystemFunction036),
 * which Wine has. Never shipped; `scripts/cross.sh wine` builds it next to the test program. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG chunk = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}

/* Host program holding a bin2c-generated fatbin array: the container sits in .rodata with no
   .nv_fatbin section and no __fatBinC_Wrapper_t pointing at it. */
#include <stdio.h>
#include "kern_fatbin.h"

int main(void) {
    printf("%zu bytes, magic %08llx\n", sizeof kern_fatbin, (unsigned long long)(kern_fatbin[0] & 0xffffffffULL));
    return 0;
}

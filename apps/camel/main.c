#include <stdio.h>

#include "camel/camel.h"

int main(void) {
    printf("camel %s\n", cml_version());
    return 0;
}

/* image_check.h — the integrity checks of upper.core without a restart (image_check.c), for
 * `crac verify`. */
#ifndef CRAC_IMAGE_CHECK_H
#define CRAC_IMAGE_CHECK_H

/* argv: crac-loader --check-core PATH HEADER_CRC CORE_SIZE. 0 intact; 1 with one line on stdout
 * saying what fails; 2 bad usage. */
int image_check_main(int argc, char **argv);

#endif

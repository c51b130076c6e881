/* probe.h — `crac-loader --probe` for `crac doctor`. */
#ifndef CRAC_PROBE_H
#define CRAC_PROBE_H

int probe_main(void);

#endif

/* crac_version.h — crac's version, recorded in images; must match crac_py.__version__. */
#ifndef CRAC_VERSION_H
#define CRAC_VERSION_H

#define CRAC_VERSION "0.1.0"

#endif

/* coord_client.h — the worker side of the coordinator protocol (docs/PROTOCOL.md). */
#ifndef CRAC_COORD_CLIENT_H
#define CRAC_COORD_CLIENT_H

#include <stddef.h>

/* Connect and say hello; returns the socket, or -1 with a message in err. restarted: 0 for a
 * launched process, else the generation a restarted one's image is (gen-N; 1 when not known). */
int coord_connect(const char *host, const char *port, const char *token, int restarted, int vpid,
                  char *err, size_t errlen);
/* The manager's loop while connected: checkpoints when the coordinator says so, forwards the
 * process's own checkpoint requests. Returns when the coordinator goes away. */
void coord_serve(int fd, int wake_fd);
/* A restarted process whose state is all back, before its threads run: tells the coordinator and
 * waits for its go, which comes once every process of the restart is back (or its deadline
 * passed): none goes on while another is still being restored (docs/PROTOCOL.md "restored").
 * Returns at once without a coordinator. */
void coord_restored(void);
/* A restart that fails before its state is back tells the coordinator (on the connection made
 * already, else on one of its own to HOST:PORT), which stops the other processes of the restart
 * rather than let them run without this one (docs/PROTOCOL.md "restore_failed"). */
void coord_restart_failed(const char *host, const char *port, const char *token, const char *why);
/* Ask the coordinator for the job's status on a connection of its own (the program's
 * dmtcp_get_coordinator_status()). 0, or -1 without a coordinator or an answer. */
int coord_status(int *num_peers, int *running);

/* The rank and size of an MPI job's process, from what its launcher put in the environment
 * (Open MPI, then PMI as MPICH's Hydra and Slurm set it). 0, or -1 outside MPI. */
int coord_launcher_rank(long *rank, long *size);
/* <proc_dir>/mpi_rank ("R S"), for a process an MPI launcher started (not one forked in the job),
 * unless the shim's MPI_Init wrote it: `crac restart` under a launcher finds each rank's image by
 * it, whether or not the program calls MPI (docs/MPI.md). */
void coord_record_launcher_rank(const char *proc_dir);

/* This process is a forked process of a tree (loader/ckpt/tree_fork.c): its hello says so. */
extern int coord_tree_child;

#endif

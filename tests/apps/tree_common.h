/* tree_common.h — what the fork-per-step tree programs (tree_forkwait.c, tree_pgrp_chld.c) share:
   their TAG [STEPS] [MS] arguments, failing at a step, forking and reaping the step's child, on
   top of ckpt_common.h. Define PROG before including. */
#ifndef TREE_COMMON_H
#define TREE_COMMON_H

#define USAGE "TAG [STEPS] [MS]"
#include "ckpt_common.h"

static const char *tag = "?";

static void fail_at(long step, const char *what, long a, long b) __attribute__((noreturn));
static void fail_at(long step, const char *what, long a, long b)
{
    fprintf(stderr, PROG " %s: FAIL at step %ld: %s (%ld, %ld)\n", tag, step, what, a, b);
    exit(1);
}

/* TAG [STEPS=100] [MS=40], read with atol (the tests give good ones); exits 2 without TAG. */
static void tree_args(int argc, char **argv, long *steps, long *ms)
{
    if (argc < 2) {
        fprintf(stderr, "usage: " PROG " " USAGE "\n");
        exit(2);
    }
    tag = argv[1];
    *steps = argc > 2 ? atol(argv[2]) : 100;
    *ms = argc > 3 ? atol(argv[3]) : 40;
}

/* fork() for step K, stdout flushed first (the child must not print the parent's lines again). */
static pid_t fork_step(long k)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        fail_at(k, "fork", errno, 0);
    return pid;
}

/* Waits for step K's child PID (through EINTR): it must be PID that ends, with status K % 100. */
static void reap_step(long k, pid_t pid)
{
    int st;
    pid_t got;
    while ((got = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
        ;
    if (got != pid)
        fail_at(k, "waitpid returned another pid (or -1: errno)", got, got < 0 ? errno : pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != k % 100)
        fail_at(k, "child status", st, k % 100);
}

#endif

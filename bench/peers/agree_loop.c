/*
 * agree_loop: ULFM's MPIX_Comm_agree in a benchagree-style loop, for bench/peers/agree.sh.
 *
 * `warmup` untimed then `iterations` timed back-to-back MPIX_Comm_agree calls on MPI_COMM_WORLD
 * (errors returned, not fatal); every rank times its own calls (entry to return), the same
 * measure as ftcoll agree's "per node" latency. With -k RANK@I, rank RANK raises SIGKILL on
 * itself instead of entering timed agreement I; the survivors acknowledge the failure
 * (MPIX_Comm_failure_ack) whenever an agreement reports one and go on, and report the time
 * from the kill (a shared CLOCK_MONOTONIC timestamp the victim writes to a file just before
 * dying) to their return from the first successful agreement after it.
 *
 * Output: one JSON line from the lowest surviving rank, times in microseconds.
 *
 * usage: agree_loop [-i ITERATIONS] [-w WARMUP] [-k RANK@I] [-f KILLFILE] [-l LABEL]
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long iterations = 10000, warmup = 1000, kill_at = -1;
    int kill_rank = -1;
    const char *label = "", *killfile = "/tmp/agree_loop.kill";
    int opt;
    while ((opt = getopt(argc, argv, "i:w:k:f:l:")) != -1) {
        switch (opt) {
        case 'i': iterations = atol(optarg); break;
        case 'w': warmup = atol(optarg); break;
        case 'k':
            if (sscanf(optarg, "%d@%ld", &kill_rank, &kill_at) != 2) {
                fprintf(stderr, "agree_loop: bad -k %s\n", optarg);
                return 2;
            }
            break;
        case 'f': killfile = optarg; break;
        case 'l': label = optarg; break;
        default: fprintf(stderr, "usage: agree_loop [-i I] [-w W] [-k RANK@I] [-f FILE] [-l LABEL]\n"); return 2;
        }
    }
    if (iterations < 1 || warmup < 0) {
        fprintf(stderr, "agree_loop: bad iteration counts\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    double *t = calloc((size_t)iterations, sizeof(double));
    if (!t) MPI_Abort(MPI_COMM_WORLD, 1);
    long failed_calls = 0, timed = 0;
    double first_ok_after_kill = -1;
    int killed = 0;
    for (long i = -warmup; i < iterations; i++) {
        if (i == kill_at && rank == kill_rank) {
            FILE *f = fopen(killfile, "w");
            if (f) {
                fprintf(f, "%.3f\n", now_us());
                fclose(f);
            }
            raise(SIGKILL);
        }
        if (i == kill_at) killed = 1;
        int flag = ~0;
        double t0 = now_us();
        int rc = MPIX_Comm_agree(MPI_COMM_WORLD, &flag);
        double t1 = now_us();
        if (rc != MPI_SUCCESS) {
            failed_calls++;
            MPIX_Comm_failure_ack(MPI_COMM_WORLD);
        } else if (killed && first_ok_after_kill < 0) {
            first_ok_after_kill = t1;
        }
        if (i >= 0) t[timed++] = t1 - t0;
    }
    qsort(t, (size_t)timed, sizeof(double), cmp_double);
    double sum = 0;
    for (long i = 0; i < timed; i++) sum += t[i];
    double since_kill = -1;
    if (kill_rank >= 0 && first_ok_after_kill >= 0) {
        FILE *f = fopen(killfile, "r");
        double k;
        if (f && fscanf(f, "%lf", &k) == 1) since_kill = first_ok_after_kill - k;
        if (f) fclose(f);
    }
    int reporter = (kill_rank == 0) ? 1 : 0;
    if (rank == reporter)
        printf("{\"label\":\"%s\",\"ranks\":%d,\"iterations\":%ld,\"p50_us\":%.3f,\"avg_us\":%.3f,"
               "\"p99_us\":%.3f,\"min_us\":%.3f,\"max_us\":%.3f,\"failed_calls\":%ld,"
               "\"first_success_after_kill_us\":%.3f}\n",
               label, size, timed, t[timed / 2], sum / (double)timed, t[(timed * 99) / 100], t[0],
               t[timed - 1], failed_calls, since_kill);
    free(t);
    MPI_Finalize();
    return 0;
}

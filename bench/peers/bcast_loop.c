/*
 * bcast_loop: an MPI_Bcast latency loop with osu_bcast's method, for bench/peers/run.sh.
 *
 * For each message size: `warmup` untimed iterations, then `iterations` timed ones; in each,
 * every rank times its own MPI_Bcast from root 0 and then enters MPI_Barrier (as osu_bcast
 * does, so that iterations do not overlap). The latency of an iteration is the maximum over
 * ranks of that rank's MPI_Bcast time. The per-iteration times are kept locally and reduced
 * with MPI_MAX once at the end (one MPI_Reduce per size, not one per iteration, so the
 * reduction does not perturb the loop).
 *
 * OSU's reported figure itself ("Avg Latency", and its min and max): each rank's own mean
 * MPI_Bcast time over the iterations, then the mean (min, max) of those over the ranks; it is
 * printed as "osu_us", beside ftcoll's `osu_bcast_us` of the same definition.
 *
 * It also records a second, ftcoll-like measure that is valid on one host only: "coloring",
 * the time from the root's entry into MPI_Bcast to the last rank's return from it, on the
 * shared CLOCK_MONOTONIC (all ranks of a single-host run read the same clock).
 *
 * Output: one JSON line per size on rank 0's stdout, times in microseconds.
 *
 * usage: bcast_loop [-i ITERATIONS] [-w WARMUP] [-s SIZE[,SIZE...]] [-l LABEL]
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZES 32
#define MAX_SIZE (1L << 24)

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

/* Nearest-rank percentile of a sorted array. */
static double pct(const double *v, long n, double q)
{
    long k = (long)(q * (double)n + 0.999999999);
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return v[k - 1];
}

static void summary(FILE *f, const char *name, double *v, long n)
{
    double sum = 0;
    for (long i = 0; i < n; i++)
        sum += v[i];
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    fprintf(f, "\"%s\":{\"t_min\":%.3f,\"p50\":%.3f,\"avg\":%.3f,\"p99\":%.3f,\"max\":%.3f}", name,
            v[0], pct(v, n, 0.50), sum / (double)n, pct(v, n, 0.99), v[n - 1]);
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static void usage_exit(int rank, const char *msg)
{
    if (rank == 0)
        fprintf(stderr, "bcast_loop: error: %s\nusage: bcast_loop [-i ITERATIONS] [-w WARMUP] "
                        "[-s SIZE[,SIZE...]] [-l LABEL]\n",
                msg);
    MPI_Finalize();
    exit(2);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nprocs;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);

    long iterations = 10000, warmup = 1000, sizes[MAX_SIZES], nsizes = 0;
    const char *label = "";
    int opt;
    while ((opt = getopt(argc, argv, "i:w:s:l:")) != -1) {
        switch (opt) {
        case 'i':
            if (parse_long(optarg, 1, 100000000, &iterations))
                usage_exit(rank, "-i wants an integer in 1..1e8");
            break;
        case 'w':
            if (parse_long(optarg, 0, 100000000, &warmup))
                usage_exit(rank, "-w wants an integer in 0..1e8");
            break;
        case 's': {
            char *copy = strdup(optarg), *save = NULL;
            nsizes = 0;
            for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (nsizes == MAX_SIZES || parse_long(t, 1, MAX_SIZE, &sizes[nsizes]))
                    usage_exit(rank, "-s wants up to 32 comma-separated sizes in 1..16777216");
                nsizes++;
            }
            free(copy);
            break;
        }
        case 'l':
            label = optarg;
            break;
        default:
            usage_exit(rank, "unknown option");
        }
    }
    if (optind != argc)
        usage_exit(rank, "unexpected argument");
    if (nsizes == 0)
        sizes[nsizes++] = 8;
    for (const char *c = label; *c; c++)
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
            usage_exit(rank, "-l must not contain quotes, backslashes or control characters");

    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen;
    MPI_Get_library_version(version, &vlen);
    char *nl = strchr(version, '\n');
    if (nl)
        *nl = 0;
    for (char *c = version; *c; c++)
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
            *c = ' ';
    char *comma = strchr(version, ',');
    if (comma)
        *comma = 0;

    double *mine = malloc((size_t)iterations * sizeof(double));
    double *done = malloc((size_t)iterations * sizeof(double));  /* return time, CLOCK_MONOTONIC */
    double *start = malloc((size_t)iterations * sizeof(double)); /* root's entry time */
    double *lat = rank == 0 ? malloc((size_t)iterations * sizeof(double)) : NULL;
    double *last = rank == 0 ? malloc((size_t)iterations * sizeof(double)) : NULL;
    if (!mine || !done || !start || (rank == 0 && (!lat || !last))) {
        fprintf(stderr, "bcast_loop: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    for (long s = 0; s < nsizes; s++) {
        char *buf = malloc((size_t)sizes[s]);
        if (!buf) {
            fprintf(stderr, "bcast_loop: out of memory\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        memset(buf, rank == 0 ? 0x5a : 0, (size_t)sizes[s]);
        MPI_Barrier(MPI_COMM_WORLD);
        double wall0 = MPI_Wtime();
        for (long i = 0; i < warmup + iterations; i++) {
            double t0 = now_us();
            MPI_Bcast(buf, (int)sizes[s], MPI_CHAR, 0, MPI_COMM_WORLD);
            double t1 = now_us();
            if (i >= warmup) {
                mine[i - warmup] = t1 - t0;
                done[i - warmup] = t1;
                start[i - warmup] = t0;
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
        double wall = MPI_Wtime() - wall0;
        if (buf[sizes[s] - 1] != 0x5a) {
            fprintf(stderr, "bcast_loop: rank %d received a wrong payload\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        free(buf);
        MPI_Reduce(mine, lat, (int)iterations, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        double own = 0, osu_sum = 0, osu_min = 0, osu_max = 0;
        for (long i = 0; i < iterations; i++)
            own += mine[i];
        own /= (double)iterations;
        MPI_Reduce(&own, &osu_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(&own, &osu_min, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(&own, &osu_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(done, last, (int)iterations, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            for (long i = 0; i < iterations; i++)
                last[i] -= start[i];
            printf("{\"impl\":\"openmpi\",\"library\":\"%s\",\"label\":\"%s\",\"np\":%d,"
                   "\"size\":%ld,\"iterations\":%ld,\"warmup\":%ld,\"wall_seconds\":%.3f,",
                   version, label, nprocs, sizes[s], iterations, warmup, wall);
            summary(stdout, "latency_us", lat, iterations);
            printf(",");
            summary(stdout, "coloring_us", last, iterations);
            printf(",\"osu_us\":{\"avg\":%.3f,\"min\":%.3f,\"max\":%.3f}", osu_sum / nprocs, osu_min,
                   osu_max);
            printf("}\n");
            fflush(stdout);
        }
    }
    free(mine);
    free(done);
    free(start);
    free(lat);
    free(last);
    MPI_Finalize();
    return 0;
}

// A LULESH-shaped time-step loop over a Domain with many tiny getters, weak scaling: every
// rank owns an s x s x s element cube.
//
//   usage: mpirun -np P ./getters S ITERATIONS
//
// Known complexity per call path: see README.md.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "domain.h"

Domain::Domain(Index_t s, int rank)
    : m_numElem(s * s * s), m_numNode((s + 1) * (s + 1) * (s + 1))
{
    for (auto *field : {&m_x, &m_y, &m_z, &m_xd, &m_yd, &m_zd, &m_xdd, &m_ydd, &m_zdd, &m_fx,
                        &m_fy, &m_fz, &m_nodalMass})
        field->assign(m_numNode, 0.0);
    for (auto *field : {&m_e, &m_p, &m_v, &m_volo, &m_elemMass})
        field->assign(m_numElem, 0.0);
    m_nodelist.resize(8 * static_cast<std::size_t>(m_numElem));
    const Real_t h = 1.0 / s;
    for (Index_t k = 0, n = 0; k <= s; ++k)
        for (Index_t j = 0; j <= s; ++j)
            for (Index_t i = 0; i <= s; ++i, ++n) {
                x(n) = h * i + rank;
                y(n) = h * j;
                z(n) = h * k;
            }
    const Index_t plane = (s + 1) * (s + 1), row = s + 1;
    for (Index_t k = 0, e = 0; k < s; ++k)
        for (Index_t j = 0; j < s; ++j)
            for (Index_t i = 0; i < s; ++i, ++e) {
                Index_t *corner = &m_nodelist[8 * static_cast<std::size_t>(e)];
                const Index_t base = k * plane + j * row + i;
                const Index_t offsets[8] = {0,     1,         row + 1,         row,
                                            plane, plane + 1, plane + row + 1, plane + row};
                for (int c = 0; c < 8; ++c)
                    corner[c] = base + offsets[c];
            }
}

static void CollectCorners(Domain &d, Index_t elem, Real_t x[8], Real_t y[8], Real_t z[8])
{
    const Index_t *nodes = d.nodelist(elem);
    for (int c = 0; c < 8; ++c) {
        x[c] = d.x(nodes[c]);
        y[c] = d.y(nodes[c]);
        z[c] = d.z(nodes[c]);
    }
}

void InitMesh(Domain &d)
{
    for (Index_t e = 0; e < d.numElem(); ++e) {
        Real_t x[8], y[8], z[8];
        CollectCorners(d, e, x, y, z);
        d.volo(e) = d.v(e) = CalcElemVolume(x, y, z);
        d.elemMass(e) = d.volo(e);
        d.e(e) = 1.0;
        const Index_t *nodes = d.nodelist(e);
        for (int c = 0; c < 8; ++c)
            d.nodalMass(nodes[c]) += d.elemMass(e) / 8;
    }
}

void CalcForceForNodes(Domain &d)
{
    for (Index_t n = 0; n < d.numNode(); ++n)
        d.fx(n) = d.fy(n) = d.fz(n) = 0.0;
    for (Index_t e = 0; e < d.numElem(); ++e) {
        Real_t x[8], y[8], z[8], fx[8], fy[8], fz[8];
        CollectCorners(d, e, x, y, z);
        d.v(e) = CalcElemVolume(x, y, z) / d.volo(e);
        d.p(e) = 0.4 * d.e(e) / d.v(e);
        CalcElemNodeForces(d.p(e), d.v(e) * d.volo(e), x, y, z, fx, fy, fz);
        const Index_t *nodes = d.nodelist(e);
        for (int c = 0; c < 8; ++c) {
            d.fx(nodes[c]) += fx[c];
            d.fy(nodes[c]) += fy[c];
            d.fz(nodes[c]) += fz[c];
        }
    }
}

void CalcAccelerationForNodes(Domain &d)
{
    for (Index_t n = 0; n < d.numNode(); ++n) {
        d.xdd(n) = d.fx(n) / d.nodalMass(n);
        d.ydd(n) = d.fy(n) / d.nodalMass(n);
        d.zdd(n) = d.fz(n) / d.nodalMass(n);
    }
}

void CalcVelocityAndPositionForNodes(Domain &d)
{
    const Real_t dt = d.deltatime();
    for (Index_t n = 0; n < d.numNode(); ++n) {
        d.xd(n) += d.xdd(n) * dt;
        d.yd(n) += d.ydd(n) * dt;
        d.zd(n) += d.zdd(n) * dt;
        d.x(n) += d.xd(n) * dt;
        d.y(n) += d.yd(n) * dt;
        d.z(n) += d.zd(n) * dt;
    }
}

// The next time step: a local bound from the fastest node, then the global minimum
// (one MPI_Allreduce of one double).
void CalcTimeConstraints(Domain &d)
{
    Real_t fastest = 1.0e-20;
    for (Index_t n = 0; n < d.numNode(); ++n)
        fastest = std::max(fastest, std::fabs(d.xd(n)) + std::fabs(d.yd(n)) + std::fabs(d.zd(n)));
    Real_t local = std::min(1.0e-7, 1.0e-3 / fastest), global = 0.0;
    MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    d.deltatime() = global;
    d.time() += global;
}

void LagrangeLeapFrog(Domain &d)
{
    CalcForceForNodes(d);
    CalcAccelerationForNodes(d);
    CalcVelocityAndPositionForNodes(d);
    CalcTimeConstraints(d);
}

static int ParsePositive(const char *text, const char *what)
{
    char *end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || value <= 0 || value > 1000) {
        std::fprintf(stderr, "getters: %s must be a positive integer <= 1000, got '%s'\n", what,
                     text);
        std::exit(2);
    }
    return static_cast<int>(value);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s S ITERATIONS\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const int s = ParsePositive(argv[1], "S"), iterations = ParsePositive(argv[2], "ITERATIONS");
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    Domain domain(s, rank);
    InitMesh(domain);
    for (int it = 0; it < iterations; ++it)
        LagrangeLeapFrog(domain);
    Real_t energy = 0.0;
    for (Index_t n = 0; n < domain.numNode(); ++n)
        energy += domain.nodalMass(n) * (domain.xd(n) * domain.xd(n) + domain.yd(n) * domain.yd(n) +
                                         domain.zd(n) * domain.zd(n));
    if (rank == 0)
        std::printf("getters: s=%d p=%d iterations=%d time=%.6e energy=%.6e\n", s, ranks,
                    iterations, domain.time(), energy);
    MPI_Finalize();
    return 0;
}

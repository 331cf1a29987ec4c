// A LULESH-style mesh: a Domain object whose fields are reached only through tiny inline
// member functions (x(i), xd(i), fx(i), nodelist(e), ...), as in LULESH's Domain class.
// After inlining these getters cost nothing; instrumentation that keeps a hook in each of
// them (gcc -finstrument-functions) makes such codes hundreds of times slower.
#ifndef GETTERS_DOMAIN_H
#define GETTERS_DOMAIN_H

#include <cstddef>
#include <vector>

using Real_t = double;
using Index_t = int;

class Domain {
  public:
    Domain(Index_t edge_elems, int rank);

    // Node-centred fields
    Real_t &x(Index_t i) { return m_x[i]; }
    Real_t &y(Index_t i) { return m_y[i]; }
    Real_t &z(Index_t i) { return m_z[i]; }
    Real_t &xd(Index_t i) { return m_xd[i]; }
    Real_t &yd(Index_t i) { return m_yd[i]; }
    Real_t &zd(Index_t i) { return m_zd[i]; }
    Real_t &xdd(Index_t i) { return m_xdd[i]; }
    Real_t &ydd(Index_t i) { return m_ydd[i]; }
    Real_t &zdd(Index_t i) { return m_zdd[i]; }
    Real_t &fx(Index_t i) { return m_fx[i]; }
    Real_t &fy(Index_t i) { return m_fy[i]; }
    Real_t &fz(Index_t i) { return m_fz[i]; }
    Real_t &nodalMass(Index_t i) { return m_nodalMass[i]; }

    // Element-centred fields
    Real_t &e(Index_t i) { return m_e[i]; }
    Real_t &p(Index_t i) { return m_p[i]; }
    Real_t &v(Index_t i) { return m_v[i]; }
    Real_t &volo(Index_t i) { return m_volo[i]; }
    Real_t &elemMass(Index_t i) { return m_elemMass[i]; }
    const Index_t *nodelist(Index_t i) const { return &m_nodelist[8 * static_cast<std::size_t>(i)]; }

    // Sizes and scalars
    Index_t numElem() const { return m_numElem; }
    Index_t numNode() const { return m_numNode; }
    Real_t &deltatime() { return m_deltatime; }
    Real_t &time() { return m_time; }

  private:
    Index_t m_numElem, m_numNode;
    Real_t m_deltatime = 1.0e-7, m_time = 0.0;
    std::vector<Real_t> m_x, m_y, m_z, m_xd, m_yd, m_zd, m_xdd, m_ydd, m_zdd;
    std::vector<Real_t> m_fx, m_fy, m_fz, m_nodalMass;
    std::vector<Real_t> m_e, m_p, m_v, m_volo, m_elemMass;
    std::vector<Index_t> m_nodelist;
};

// Per-element kernels, defined in elem.cpp: called once per element and time step, and
// never inlined (another translation unit), like LULESH's CalcElemVolume.
Real_t CalcElemVolume(const Real_t x[8], const Real_t y[8], const Real_t z[8]);
void CalcElemNodeForces(Real_t pressure, Real_t volume, const Real_t x[8], const Real_t y[8],
                        const Real_t z[8], Real_t fx[8], Real_t fy[8], Real_t fz[8]);

#endif

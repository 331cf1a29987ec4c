#include "domain.h"

// Volume of a hexahedron from its eight corners (signed triple products of the diagonals).
Real_t CalcElemVolume(const Real_t x[8], const Real_t y[8], const Real_t z[8])
{
    const Real_t dx61 = x[6] - x[1], dy61 = y[6] - y[1], dz61 = z[6] - z[1];
    const Real_t dx70 = x[7] - x[0], dy70 = y[7] - y[0], dz70 = z[7] - z[0];
    const Real_t dx63 = x[6] - x[3], dy63 = y[6] - y[3], dz63 = z[6] - z[3];
    const Real_t dx20 = x[2] - x[0], dy20 = y[2] - y[0], dz20 = z[2] - z[0];
    const Real_t dx50 = x[5] - x[0], dy50 = y[5] - y[0], dz50 = z[5] - z[0];
    const Real_t dx64 = x[6] - x[4], dy64 = y[6] - y[4], dz64 = z[6] - z[4];
    auto triple = [](Real_t ax, Real_t ay, Real_t az, Real_t bx, Real_t by, Real_t bz,
                     Real_t cx, Real_t cy, Real_t cz) {
        return ax * (by * cz - bz * cy) + ay * (bz * cx - bx * cz) + az * (bx * cy - by * cx);
    };
    return (triple(dx61 + dx70, dy61 + dy70, dz61 + dz70, dx63, dy63, dz63, dx20, dy20, dz20) +
            triple(dx70 + dx63, dy70 + dy63, dz70 + dz63, dx64, dy64, dz64, dx50, dy50, dz50)) /
           12.0;
}

// Pressure force on the eight corners, pointing away from the element's centre.
void CalcElemNodeForces(Real_t pressure, Real_t volume, const Real_t x[8], const Real_t y[8],
                        const Real_t z[8], Real_t fx[8], Real_t fy[8], Real_t fz[8])
{
    Real_t cx = 0, cy = 0, cz = 0;
    for (int k = 0; k < 8; ++k) {
        cx += x[k];
        cy += y[k];
        cz += z[k];
    }
    cx /= 8;
    cy /= 8;
    cz /= 8;
    const Real_t scale = pressure * volume / 8;
    for (int k = 0; k < 8; ++k) {
        fx[k] = scale * (x[k] - cx);
        fy[k] = scale * (y[k] - cy);
        fz[k] = scale * (z[k] - cz);
    }
}

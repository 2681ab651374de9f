/**
 * The release every Sextant service and sextantctl belong to (all the
 * workspace's packages carry it): what each service records in
 * sextant-members and `sextantctl version` prints per service.
 */
export const SEXTANT_VERSION = "0.0.0";

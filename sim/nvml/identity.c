/* Simulated NVML: identity queries (UUID, PCI info, name, brand, architecture, compute
 * capability, serial, minor number, persistence and compute mode, display, driver model).
 * UUID and name also answer on MIG handles, as NVML does: a MIG device's name is the
 * parent's plus " MIG <profile>". Serial is NOT_SUPPORTED on GeForce whatever the scenario
 * says (nvmlDeviceGetSerial: "For all products with an inforom"; GeForce has none). */
#include "internal.h"
#include "../util.h"

void sim_fill_pci(nvmlPciInfo_t *pci, const char *bus_id, unsigned int device_id)
{
	unsigned int dom = 0, bus = 0, dev = 0;

	memset(pci, 0, sizeof(*pci));
	(void)sscanf(bus_id, "%8x:%2x:%2x", &dom, &bus, &dev);
	pci->domain = dom;
	pci->bus = bus;
	pci->device = dev;
	pci->pciDeviceId = device_id;
	pci->pciSubSystemId = 0;
	snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.0", dom, bus, dev);
	snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0", dom & 0xffff, bus,
	         dev);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
	SIM_DEVICE_CALL(nvmlDeviceGetUUID, device, SIM_MIG_OK);
	return sim_end(sim_copy_string(uuid, length, c.m ? c.m->uuid : c.g->uuid));
}

static nvmlReturn_t pci_info(enum sim_fn fn, nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	struct sim_call c;
	nvmlReturn_t r = sim_begin_dev(fn, device, 0, &c);

	if (r != NVML_SUCCESS)
		return sim_end(r);
	if (!pci)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	sim_fill_pci(pci, c.g->pci_bus_id, c.g->pci_device_id);
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	return pci_info(SIM_FN_nvmlDeviceGetPciInfo_v3, device, pci);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	return pci_info(SIM_FN_nvmlDeviceGetPciInfo_v2, device, pci);
}

/* The unversioned call writes the first layout: a 16-byte busId of the 4-hex-digit-domain form. */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_v1_t *pci)
{
	nvmlPciInfo_t full;

	SIM_DEVICE_CALL(nvmlDeviceGetPciInfo, device, 0);
	if (!pci)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	sim_fill_pci(&full, c.g->pci_bus_id, c.g->pci_device_id);
	memset(pci, 0, sizeof(*pci));
	memcpy(pci->busId, full.busIdLegacy, sizeof(pci->busId));
	pci->domain = full.domain;
	pci->bus = full.bus;
	pci->device = full.device;
	pci->pciDeviceId = full.pciDeviceId;
	pci->pciSubSystemId = full.pciSubSystemId;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
	char buf[200];

	SIM_DEVICE_CALL(nvmlDeviceGetName, device, SIM_MIG_OK);
	if (c.m)
		snprintf(buf, sizeof(buf), "%s MIG %s", c.g->name, c.m->profile);
	else
		sim_strlcpy(buf, c.g->name, sizeof(buf));
	return sim_end(sim_copy_string(name, length, buf));
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type)
{
	SIM_DEVICE_CALL(nvmlDeviceGetBrand, device, 0);
	if (!type)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*type = (nvmlBrandType_t)c.g->brand;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device,
                                                  nvmlDeviceArchitecture_t *arch)
{
	SIM_DEVICE_CALL(nvmlDeviceGetArchitecture, device, 0);
	if (!arch)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*arch = c.g->arch;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major,
                                                           int *minor)
{
	SIM_DEVICE_CALL(nvmlDeviceGetCudaComputeCapability, device, 0);
	if (!major || !minor)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*major = c.g->cc_major;
	*minor = c.g->cc_minor;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length)
{
	SIM_DEVICE_CALL(nvmlDeviceGetSerial, device, 0);
	if (c.g->brand == NVML_BRAND_GEFORCE || !c.g->has_serial)
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	return sim_end(sim_copy_string(serial, length, c.g->serial));
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
	SIM_DEVICE_CALL(nvmlDeviceGetMinorNumber, device, 0);
	if (!minorNumber)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*minorNumber = c.g->minor_number;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
	SIM_DEVICE_CALL(nvmlDeviceGetPersistenceMode, device, 0);
	if (!mode)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*mode = c.g->persistence_mode ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode)
{
	SIM_DEVICE_CALL(nvmlDeviceGetComputeMode, device, 0);
	if (!mode)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*mode = (nvmlComputeMode_t)c.g->compute_mode;
	return sim_end(NVML_SUCCESS);
}

/* No simulated GPU drives a display: no monitor attached, none initialised. */
static nvmlReturn_t display(enum sim_fn fn, nvmlDevice_t device, nvmlEnableState_t *state)
{
	struct sim_call c;
	nvmlReturn_t r = sim_begin_dev(fn, device, 0, &c);

	if (r != NVML_SUCCESS)
		return sim_end(r);
	if (!state)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*state = NVML_FEATURE_DISABLED;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t device, nvmlEnableState_t *display_)
{
	return display(SIM_FN_nvmlDeviceGetDisplayMode, device, display_);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device, nvmlEnableState_t *isActive)
{
	return display(SIM_FN_nvmlDeviceGetDisplayActive, device, isActive);
}

/* The driver model is a Windows notion (WDDM or TCC): NVML on Linux answers NOT_SUPPORTED. */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetDriverModel(nvmlDevice_t device, unsigned int *current,
                                                 unsigned int *pending)
{
	SIM_DEVICE_CALL(nvmlDeviceGetDriverModel, device, 0);
	(void)current;
	(void)pending;
	return sim_end(NVML_ERROR_NOT_SUPPORTED);
}

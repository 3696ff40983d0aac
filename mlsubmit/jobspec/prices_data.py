"""The rows of the price table (mlsubmit.jobspec.prices), as read from their sources; nothing here is computed.

Each dict maps a name to {region: (on demand, spot)} in USD per hour, for ONE machine or ONE accelerator. A row may
name a machine, an accelerator or a region the machine table does not have (yet): the table keeps only what the
machine table knows. A region missing from a row has no price in that source: it stays unknown, and the lookups say
why (COMPUTE_NOT_TAKEN, VERTEX_NOT_DERIVED below, or "the source has no row").

"skypilot-v8": skypilot-org/skypilot-catalog, catalogs/v8/gcp/vms.csv at commit
006059e0f18acb1341e22a27751e9f80df6ba92f (SkyPilot builds it from the Cloud Billing Catalog API; columns Price and
SpotPrice; the rows of a region's zones agree). Read 2026-11-25 (n1, g2, a2, the GPUs) and 2026-11-28 (a3 VMs, the
rows left unknown). Machine rows are the VM alone; GPU rows are the rows with an empty InstanceType, AcceleratorCount
1 (one GPU), so a replica costs machine + count x GPU, as Compute Engine bills it (e.g. a2-highgpu-1g $0.73948 + A100
$2.93391 = $3.67339 in us-central1). The a3 VM rows are the VM alone too (a3-highgpu-8g $9.46006 + 8 x the H100 row of
us-east4, $9.79655, is $87.83, Google's a3-highgpu-8g less its local SSD), but their GPUs stay unknown, so no a3
replica has a price yet. What was not taken, and why, is COMPUTE_NOT_TAKEN. catalogs/v9/gcp/vms.csv @2c3d7ea7 was
checked too: the same on-demand rows for the H100, H100 Mega and H200, with spot above on demand in more regions; no
better.
Taken as the source says although it looks odd: the A100 row in europe-west4 and asia ($1.61365, $1.70586) is about
half the us-central1 one ($2.93391); Google's page is the arbiter when they disagree (tools/refresh_prices.py reads
its SKUs).

Vertex AI: Google's page as quoted (VERTEX_*_ON_DEMAND), and the evidence for deriving the rest from Compute Engine
(VERTEX_FACTOR, VERTEX_EVIDENCE, VERTEX_AGAINST); mlsubmit.jobspec.prices applies the rule.
"""

from __future__ import annotations

Rows = dict[str, dict[str, tuple[float, float]]]

# Vertex AI custom training, on demand, us-central1: Google's pricing page as quoted verbatim in
# api-evangelist/google-vertex-ai plans/google-vertex-ai-plans-pricing.yml @342263c39279 (page read 2026-10-07).
VERTEX_MACHINES_ON_DEMAND = {"n1-standard-4": {"us-central1": 0.21849885}}
VERTEX_ACCELERATORS_ON_DEMAND = {"NVIDIA_H100_80GB": {"us-central1": 9.79655057}}

# Vertex AI training = VERTEX_FACTOR x Compute Engine, for n1 machines and the GPUs they carry, on demand: the two
# pairs known exactly both give 1.15. (name, region, Vertex AI USD/h, Compute Engine USD/h, where each was read.)
VERTEX_FACTOR = 1.15
VERTEX_EVIDENCE = (
    ("n1-standard-4", "us-central1", 0.21849885, 0.189999,
     "Vertex AI: the page via api-evangelist @342263c3 (2026-10-07); Compute Engine: 4 vCPU x $0.031611 + 15 GiB x "
     "$0.004237 (its N1 SKUs; SkyPilot rounds it to $0.19)"),
    ("NVIDIA_TESLA_T4", "us-central1", 0.4025, 0.35,
     "Vertex AI: the page (vertex-ai/pricing#training) quoted in Lezek123/musicnet-transcription gc-job.yaml @573767d "
     "(2024-09-02); Compute Engine: skypilot-v8"),
)
# Read beside the rule, and why it stops at n1 machines and their GPUs, on demand:
#   fits, to the quote's precision: n1-highmem-8 "$0.6 / hr (in eu-west4)" on Vertex AI (same file @573767d) vs
#     1.15 x Compute Engine's $0.52094 = $0.59908.
#   does not fit: the H100 on Vertex AI, $9.79655057 in us-central1 (the page above), is 1.0 x the one-H100 Compute
#     Engine row of us-east4 ($9.79655) and 2.33 x the us-central1 row ($4.20076), never 1.15 x; an L4 "$0.709 / hr"
#     on Vertex AI (gc-job.yaml @da12943, region not said; the job ran in europe-west4) is 1.27 x Compute Engine's
#     us-central1 L4 ($0.56004) and 1.21 x europe-west4's ($0.58804) (only europe-west1's $0.61666 x 1.15 = $0.70916
#     would fit, had the page been set to Belgium); the same file reads Vertex AI's g2 SKUs as $0.0358 a vCPU-hour
#     and $0.0042 a GiB-hour, 1.27-1.36 x Compute Engine's g2-standard-8 in us-west4/europe-west4. So
#     accelerator-optimized families (a2, a3, a4, g2, g4) and their GPUs are not derived.
#   untested: TPUs (no Vertex AI TPU price and Cloud TPU pair was found) and spot (every pair is on demand; Compute
#     Engine's spot prices move up to once a day).
VERTEX_AGAINST = ("the 1.15 rule is not applied to it: the rule holds for n1 machines and the GPUs they carry, "
                  "while Vertex AI's H100 ($9.79655057) is 1.0 x a Compute Engine H100 row and its L4 and g2 "
                  "quotes are 1.2-1.4 x Compute Engine's")
VERTEX_TPU = "no Vertex AI TPU price was found to test the 1.15 rule on"
VERTEX_SPOT = ("no source gives Vertex AI spot prices, and the 1.15 rule is not applied to spot: its evidence is on "
               "demand only (and Compute Engine's spot prices move up to once a day)")

_US = ("us-central1", "us-east1", "us-west1")  # the three regions share one price in every row below that names them


def _us(on_demand: float, spot: float) -> dict[str, tuple[float, float]]:
    return {region: (on_demand, spot) for region in _US}


COMPUTE_MACHINES: Rows = {
    "n1-standard-4": {
        "asia-east1": (0.22, 0.03563), "asia-northeast1": (0.24376, 0.06662),
        "asia-southeast1": (0.23439, 0.03872), "europe-west1": (0.20901, 0.06251),
        "europe-west4": (0.20917, 0.08367), **_us(0.19, 0.05223),
        "us-east4": (0.21398, 0.0452), "us-west4": (0.21398, 0.06508)},
    "n1-standard-8": {
        "asia-east1": (0.44, 0.07126), "asia-northeast1": (0.48751, 0.13323),
        "asia-southeast1": (0.46877, 0.07744), "europe-west1": (0.41801, 0.12502),
        "europe-west4": (0.41834, 0.16734), **_us(0.38, 0.10446),
        "us-east4": (0.42797, 0.09039), "us-west4": (0.42797, 0.13016)},
    "n1-standard-16": {
        "asia-east1": (0.87999, 0.14252), "asia-northeast1": (0.97503, 0.26646),
        "asia-southeast1": (0.93754, 0.15488), "europe-west1": (0.83603, 0.25004),
        "europe-west4": (0.83667, 0.33468), **_us(0.76, 0.20892),
        "us-east4": (0.85594, 0.18078), "us-west4": (0.85594, 0.26032)},
    "n1-standard-32": {
        "asia-east1": (1.75998, 0.28504), "asia-northeast1": (1.95006, 0.53292),
        "asia-southeast1": (1.87509, 0.30976), "europe-west1": (1.67206, 0.50008),
        "europe-west4": (1.67334, 0.66936), **_us(1.51999, 0.41784),
        "us-east4": (1.71188, 0.36156), "us-west4": (1.71188, 0.52064)},
    "n1-standard-64": {
        "asia-east1": (3.51997, 0.57008), "asia-northeast1": (3.90011, 1.06584),
        "asia-southeast1": (3.75018, 0.61952), "europe-west1": (3.34411, 1.00016),
        "europe-west4": (3.34669, 1.33872), **_us(3.03998, 0.83568),
        "us-east4": (3.42376, 0.72312), "us-west4": (3.42376, 1.04128)},
    "n1-standard-96": {
        "asia-east1": (5.27995, 0.85512), "asia-northeast1": (5.85017, 1.59876),
        "asia-southeast1": (5.62526, 0.92928), "europe-west1": (5.01617, 1.50024),
        "europe-west4": (5.02003, 2.00808), **_us(4.55998, 1.25352),
        "us-east4": (5.13564, 1.08468), "us-west4": (5.13564, 1.56192)},
    "n1-highmem-2": {
        "asia-east1": (0.13698, 0.02218), "asia-northeast1": (0.15168, 0.04145),
        "asia-southeast1": (0.14594, 0.02411), "europe-west1": (0.13014, 0.03892),
        "europe-west4": (0.13024, 0.0521), **_us(0.1183, 0.03233),
        "us-east4": (0.13323, 0.02764), "us-west4": (0.13323, 0.0405)},
    "n1-highmem-4": {
        "asia-east1": (0.27396, 0.04436), "asia-northeast1": (0.30337, 0.08291),
        "asia-southeast1": (0.29187, 0.04822), "europe-west1": (0.26028, 0.07784),
        "europe-west4": (0.26047, 0.1042), **_us(0.23661, 0.06466),
        "us-east4": (0.26647, 0.05528), "us-west4": (0.26647, 0.08101)},
    "n1-highmem-8": {
        "asia-east1": (0.54793, 0.08873), "asia-northeast1": (0.60673, 0.16581),
        "asia-southeast1": (0.58374, 0.09645), "europe-west1": (0.52056, 0.15569),
        "europe-west4": (0.52094, 0.20839), **_us(0.47321, 0.12932),
        "us-east4": (0.53293, 0.11056), "us-west4": (0.53293, 0.16202)},
    "n1-highmem-16": {
        "asia-east1": (1.09586, 0.17746), "asia-northeast1": (1.21346, 0.33162),
        "asia-southeast1": (1.16749, 0.1929), "europe-west1": (1.04111, 0.31138),
        "europe-west4": (1.04189, 0.41678), **_us(0.94642, 0.25864),
        "us-east4": (1.06586, 0.22113), "us-west4": (1.06586, 0.32403)},
    "n1-highmem-32": {
        "asia-east1": (2.19171, 0.35491), "asia-northeast1": (2.42693, 0.66325),
        "asia-southeast1": (2.33498, 0.38579), "europe-west1": (2.08222, 0.62275),
        "europe-west4": (2.08378, 0.83357), **_us(1.89285, 0.51728),
        "us-east4": (2.13173, 0.44226), "us-west4": (2.13173, 0.64806)},
    "n1-highmem-64": {
        "asia-east1": (4.38342, 0.70982), "asia-northeast1": (4.85386, 1.3265),
        "asia-southeast1": (4.66995, 0.77158), "europe-west1": (4.16445, 1.2455),
        "europe-west4": (4.16755, 1.66714), **_us(3.7857, 1.03456),
        "us-east4": (4.26346, 0.88451), "us-west4": (4.26346, 1.29613)},
    "n1-highmem-96": {
        "asia-east1": (6.57514, 1.06474), "asia-northeast1": (7.28078, 1.98974),
        "asia-southeast1": (7.00493, 1.15738), "europe-west1": (6.24667, 1.86826),
        "europe-west4": (6.25133, 2.5007), **_us(5.67854, 1.55184),
        "us-east4": (6.39518, 1.32677), "us-west4": (6.39518, 1.94419)},
    "n1-highcpu-16": {
        "asia-east1": (0.65628, 0.10631), "asia-northeast1": (0.72792, 0.19893),
        "asia-southeast1": (0.69924, 0.11548), "europe-west1": (0.62349, 0.18647),
        "europe-west4": (0.624, 0.24959), **_us(0.56679, 0.15739),
        "us-east4": (0.63838, 0.13897), "us-west4": (0.63838, 0.19429)},
    "n1-highcpu-32": {
        "asia-east1": (1.31256, 0.21263), "asia-northeast1": (1.45584, 0.39785),
        "asia-southeast1": (1.39848, 0.23096), "europe-west1": (1.24697, 0.37295),
        "europe-west4": (1.24799, 0.49918), **_us(1.13358, 0.31478),
        "us-east4": (1.27676, 0.27793), "us-west4": (1.27676, 0.38858)},
    "n1-highcpu-64": {
        "asia-east1": (2.62511, 0.42525), "asia-northeast1": (2.91168, 0.79571),
        "asia-southeast1": (2.79695, 0.46193), "europe-west1": (2.49394, 0.74589),
        "europe-west4": (2.49597, 0.99836), **_us(2.26715, 0.62957),
        "us-east4": (2.55353, 0.55586), "us-west4": (2.55353, 0.77716)},
    "n1-highcpu-96": {
        "asia-east1": (3.93767, 0.63788), "asia-northeast1": (4.36753, 1.19356),
        "asia-southeast1": (4.19543, 0.69289), "europe-west1": (3.74092, 1.11884),
        "europe-west4": (3.74396, 1.49754), **_us(3.40073, 0.94435),
        "us-east4": (3.8303, 0.83379), "us-west4": (3.8303, 1.16575)},
    # g2: the VM without its L4s (priced as accelerators below)
    "g2-standard-4": {
        "asia-east1": (0.16997, 0.0449), "asia-northeast1": (0.18851, 0.09422),
        "asia-southeast1": (0.1811, 0.07535), "europe-west1": (0.16163, 0.05296),
        "europe-west4": (0.15429, 0.0715), **_us(0.14679, 0.05874),
        "us-east4": (0.14631, 0.05851), "us-west4": (0.16533, 0.05125)},
    "g2-standard-8": {
        "asia-east1": (0.33994, 0.08979), "asia-northeast1": (0.37702, 0.18845),
        "asia-southeast1": (0.36219, 0.1507), "europe-west1": (0.32327, 0.10592),
        "europe-west4": (0.30857, 0.14299), **_us(0.29358, 0.11747),
        "us-east4": (0.29262, 0.11702), "us-west4": (0.33066, 0.1025)},
    "g2-standard-12": {
        "asia-east1": (0.50991, 0.13469), "asia-northeast1": (0.56553, 0.28267),
        "asia-southeast1": (0.54329, 0.22606), "europe-west1": (0.4849, 0.15888),
        "europe-west4": (0.46286, 0.21449), **_us(0.44038, 0.17621),
        "us-east4": (0.43893, 0.17554), "us-west4": (0.496, 0.15374)},
    "g2-standard-16": {
        "asia-east1": (0.67988, 0.17958), "asia-northeast1": (0.75404, 0.3769),
        "asia-southeast1": (0.72439, 0.30141), "europe-west1": (0.64653, 0.21184),
        "europe-west4": (0.61714, 0.28598), **_us(0.58717, 0.23494),
        "us-east4": (0.58525, 0.23405), "us-west4": (0.66133, 0.20499)},
    "g2-standard-24": {
        "asia-east1": (1.01982, 0.26938), "asia-northeast1": (1.13106, 0.56534),
        "asia-southeast1": (1.08658, 0.45211), "europe-west1": (0.9698, 0.31776),
        "europe-west4": (0.92571, 0.42898), **_us(0.88075, 0.35242),
        "us-east4": (0.87787, 0.35107), "us-west4": (0.99199, 0.30749)},
    "g2-standard-32": {
        "asia-east1": (1.35976, 0.35917), "asia-northeast1": (1.50808, 0.75379),
        "asia-southeast1": (1.44878, 0.60282), "europe-west1": (1.29306, 0.42368),
        "europe-west4": (1.23429, 0.57197), **_us(1.17434, 0.46989),
        "us-east4": (1.17049, 0.4681), "us-west4": (1.32265, 0.40998)},
    "g2-standard-48": {
        "asia-east1": (2.03965, 0.53875), "asia-northeast1": (2.26212, 1.13069),
        "asia-southeast1": (2.17317, 0.90422), "europe-west1": (1.93959, 0.63552),
        "europe-west4": (1.85143, 0.85795), **_us(1.7615, 0.70483),
        "us-east4": (1.75574, 0.70214), "us-west4": (1.98398, 0.61498)},
    "g2-standard-96": {
        "asia-east1": (4.07929, 1.0775), "asia-northeast1": (4.52425, 2.26138),
        "asia-southeast1": (4.34634, 1.80845), "europe-west1": (3.87918, 1.27104),
        "europe-west4": (3.70286, 1.7159), **_us(3.52301, 1.40966),
        "us-east4": (3.51147, 1.40429), "us-west4": (3.96796, 1.22995)},
    # a2: the VM without its A100s (priced as accelerators below)
    "a2-highgpu-1g": {
        "asia-northeast1": (0.94803, 0.41783), "asia-southeast1": (0.9122, 0.41954),
        "europe-west4": (0.81406, 0.31824), **_us(0.73948, 0.36975), "us-west4": (0.8328, 0.33306)},
    "a2-highgpu-2g": {
        "asia-northeast1": (1.89606, 0.83566), "asia-southeast1": (1.8244, 0.83907),
        "europe-west4": (1.62813, 0.63648), **_us(1.47895, 0.7395), "us-west4": (1.66559, 0.66612)},
    "a2-highgpu-4g": {
        "asia-northeast1": (3.79212, 1.67132), "asia-southeast1": (3.64879, 1.67814),
        "europe-west4": (3.25626, 1.27296), **_us(2.95791, 1.479), "us-west4": (3.33118, 1.33224)},
    "a2-highgpu-8g": {
        "asia-northeast1": (7.58425, 3.34264), "asia-southeast1": (7.29758, 3.35628),
        "europe-west4": (6.51251, 2.54592), **_us(5.91582, 2.958), "us-west4": (6.66236, 2.66448)},
    "a2-megagpu-16g": {
        "asia-southeast1": (10.85126, 4.99032), "europe-west4": (9.68403, 3.78624),
        "us-central1": (8.79698, 4.39824)},
    "a2-ultragpu-1g": {
        "asia-southeast1": (1.35641, 0.62379), "europe-west4": (1.2105, 0.47328),
        "us-central1": (1.09962, 0.54978), "us-east4": (1.23833, 0.49613)},
    "a2-ultragpu-2g": {
        "asia-southeast1": (2.71282, 1.24758), "europe-west4": (2.42101, 0.94656),
        "us-central1": (2.19924, 1.09956), "us-east4": (2.47666, 0.99226)},
    "a2-ultragpu-4g": {
        "asia-southeast1": (5.42563, 2.49516), "europe-west4": (4.84202, 1.89312),
        "us-central1": (4.39849, 2.19912), "us-east4": (4.95332, 1.98452)},
    "a2-ultragpu-8g": {
        "asia-southeast1": (10.85126, 4.99032), "europe-west4": (9.68403, 3.78624),
        "us-central1": (8.79698, 4.39824), "us-east4": (9.90664, 3.96904)},
    # a3: the VM without its GPUs (read 2026-11-28); the H100/H200 rows are not taken (COMPUTE_NOT_TAKEN)
    "a3-highgpu-8g": {
        "asia-east1": (10.95381, 2.74269), "asia-northeast1": (12.14861, 3.04013), "asia-south1": (9.83846, 2.25285),
        "asia-south2": (11.36248, 2.59792), "asia-southeast1": (11.67088, 2.79032),
        "australia-southeast1": (11.82508, 2.49496), "europe-north1": (10.41647, 1.61762),
        "europe-west1": (10.41647, 2.38181), "europe-west3": (11.16287, 2.55632), "europe-west4": (9.93306, 2.27469),
        "europe-west9": (10.97367, 2.25971), "us-central1": (9.46006, 2.88933), "us-east4": (9.46006, 2.15966),
        "us-east5": (10.65487, 2.32627), "us-west1": (9.46006, 2.88933), "us-west4": (10.65487, 2.43734)},
    "a3-megagpu-8g": {
        "asia-east1": (10.95381, 2.74269), "asia-northeast1": (12.14861, 3.04013),
        "asia-southeast1": (11.67088, 2.79032), "australia-southeast1": (11.82508, 2.49496),
        "europe-north1": (10.41647, 1.61762), "europe-west1": (10.41647, 2.38181), "europe-west3": (11.16287, 2.55632),
        "europe-west4": (9.93306, 2.27469), "us-central1": (9.46006, 2.88933), "us-east4": (9.46006, 2.15966),
        "us-east5": (10.65487, 2.32627), "us-west1": (9.46006, 2.88933), "us-west4": (10.65487, 2.43734)},
    "a3-ultragpu-8g": {
        "asia-south1": (12.75664, 2.92129), "asia-south2": (14.73269, 3.36872), "europe-west1": (13.50609, 3.08825),
        "europe-west4": (12.8793, 2.94949), "us-central1": (12.266, 3.74713), "us-east4": (12.266, 2.80034),
        "us-east5": (13.81519, 3.01627), "us-south1": (14.47387, 3.15354), "us-west1": (12.266, 3.74713)},
}

COMPUTE_ACCELERATORS: Rows = {
    "NVIDIA_TESLA_T4": {
        "asia-east1": (0.35, 0.1383), "asia-northeast1": (0.37, 0.1311), "asia-southeast1": (0.37, 0.1645),
        "europe-west1": (0.35, 0.14), "europe-west4": (0.3675, 0.175), **_us(0.35, 0.175),
        "us-east4": (0.37, 0.1644), "us-west4": (0.37, 0.1258)},
    "NVIDIA_TESLA_V100": {
        "asia-east1": (2.48, 0.6356), "europe-west4": (2.604, 1.0443), **_us(2.48, 1.0885)},
    "NVIDIA_TESLA_P100": {
        "asia-east1": (1.6, 0.144), "europe-west1": (1.6, 0.2816), "europe-west4": (1.533, 0.2341),
        **_us(1.46, 0.7034)},
    "NVIDIA_TESLA_P4": {
        "asia-southeast1": (0.65, 0.0585), "europe-west4": (0.63, 0.132), "us-central1": (0.6, 0.2236),
        "us-east4": (0.6, 0.1734)},
    "NVIDIA_L4": {
        "asia-east1": (0.64847, 0.2311), "asia-northeast1": (0.7192, 0.3564), "asia-southeast1": (0.69092, 0.2478),
        "europe-west1": (0.61666, 0.2406), "europe-west4": (0.58804, 0.2438), **_us(0.56004, 0.2231),
        "us-east4": (0.55821, 0.2233), "us-west4": (0.63077, 0.2103)},
    "NVIDIA_TESLA_A100": {
        "asia-northeast1": (1.70586, 1.2307), "asia-southeast1": (1.70586, 1.4261),
        "europe-west4": (1.61365, 1.1691), **_us(2.93391, 1.4341), "us-west4": (3.10156, 1.2406)},
}

# What skypilot-v8 has but the table does not take, and why (the estimate says it). Names the source has no row for at
# all (the GB200, the RTX PRO 6000, the a4x and g4 machines) need no entry: the lookups say "no row". Every TPU and
# TPU machine gets TPU_NOT_COMPUTE.
TPU_NOT_COMPUTE = ("Cloud TPU, not Compute Engine, bills TPUs (skypilot-v8's tpu-v2-8 row: $4.50 a device-hour in "
            "us-central1; tpu-v5litepod-1: $1.20 a chip-hour) and the kubernetes target runs no TPU pools")
COMPUTE_NOT_TAKEN = {
    "NVIDIA_TESLA_K80": "it has no K80 rows (retired)",
    "NVIDIA_A100_80GB": "its one-GPU rows have spot above on demand (us-central1: $1.964 vs $1.8462) and us-east5's "
                        "is 2.4 x us-central1's",
    "NVIDIA_H100_80GB": "its one-GPU row is $4.20076 in us-central1 but $9.79655 in us-east4 and $12.73552 in "
                        "europe-west4 (4 x H100: $16.80 in us-central1, $39.19 in us-east4)",
    "NVIDIA_H100_MEGA_80GB": "its 8-GPU row is $82.75421 in us-central1 but $35.39149 in asia-southeast1 and "
                             "$107.58048 in europe-west4",
    "NVIDIA_H200_141GB": "its 8-GPU row is $74.49392 in us-central1 but $36.60258 in europe-west4, where spot "
                         "($39.1096) is above on demand",
    "NVIDIA_B200": "its 8-GPU row is $90.216 in us-central1 but $64.44 in us-east4, and a4-highgpu-8g's VM row is $0",
    "a4-highgpu-8g": "its VM row is $0 (the B200 rows carry the VM) and those B200 rows disagree by region",
    "cloud-tpu": TPU_NOT_COMPUTE,
    "TPU_V2": TPU_NOT_COMPUTE,
    "TPU_V3": TPU_NOT_COMPUTE,
    "TPU_V5_LITEPOD": TPU_NOT_COMPUTE,
}

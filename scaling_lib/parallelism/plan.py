"""The parallel plan, as the strategies see it: :mod:`scaling_lib.plan` re-exported.

``ParallelPlan`` lives on the ground floor (``scaling_lib.plan``) so that ``memory`` and the
strategies can both import it without an import cycle; this module keeps the old path working.
"""

from ..plan import (CP_VARIANTS, PP_LAYOUTS, RECOMPUTE, SCHEDULES, ZERO_STAGES,  # noqa: F401
                    ParallelPlan, check_plan, check_step_args, pipeline_bubble_fraction)

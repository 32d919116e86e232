"""Play policies on identical episodes and report them: ``evaluate`` runs them, ``results`` holds
what a run found (its tables' columns), ``statistics`` the day bootstrap, ``figures`` and
``timeline`` the pictures."""

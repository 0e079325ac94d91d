from django.apps import AppConfig


class LeagueConfig(AppConfig):
    name = "league"

    def ready(self) -> None:
        # A league the organiser ends tells its agents (league/conductor/farewell.py).
        from league.conductor import farewell

        farewell.connect()

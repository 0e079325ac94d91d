# Event.payload, MatchResult.details and MatchResult.log become league.fields.FastJSONField
# (orjson encoding). Same column type and the same stored JSON text: state only, no table rebuild.

from django.db import migrations

import league.fields


class Migration(migrations.Migration):
    dependencies = [
        ("league", "0002_league_round_pause"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="event",
                    name="payload",
                    field=league.fields.FastJSONField(default=dict),
                ),
                migrations.AlterField(
                    model_name="matchresult",
                    name="details",
                    field=league.fields.FastJSONField(
                        default=dict, help_text="Choices, drawn number, rounds, reasons."
                    ),
                ),
                migrations.AlterField(
                    model_name="matchresult",
                    name="log",
                    field=league.fields.FastJSONField(
                        default=list, help_text="The referee's ordered message log (for the replay)."
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
